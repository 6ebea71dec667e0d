package gateway

// CanonicalHash exposes canonicalHash to the fuzz tests.
var CanonicalHash = canonicalHash

// ParseIdentity exposes parseIdentity to the fuzz tests.
var ParseIdentity = parseIdentity

// MethodOf exposes methodOf to the fuzz tests.
var MethodOf = methodOf

// RoutePath exposes routePath to the fuzz tests.
var RoutePath = routePath
