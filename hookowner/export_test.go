package hookowner

// HostOf, OwnerTagOf and WithoutOwner expose the readers of a registered
// webhook address to the fuzz tests.
var (
	HostOf       = hostOf
	OwnerTagOf   = ownerTagOf
	WithoutOwner = withoutOwner
)
