package storetest

// claimedAddReceiptRule is the rule of claimedAddKeepsReceipt.
const claimedAddReceiptRule = "a row recorded claimed keeps its receipt time, not its claim's: Get and a later Due report Incoming.ReceivedAt"

// claimedAddKeepsReceipt: a claimed add is a claim of a fresh pending row,
// and a claim never changes a row's receipt ([intake.StoredUpdate] reports
// it whatever the state, and the runner counts an update's deadline from
// it). The intake claims on add at the time of receipt, so the two times
// agree there, and a store that wrote the claim's Now as the receipt would
// pass every case whose times agree too. Update 1 is received at 5ms and
// recorded claimed at 10ms, under a lease to 30ms: Get shows it received
// at 5ms, and once its lease lapsed Due lists it received at 5ms.
func claimedAddKeepsReceipt(c *checker) {
	res := c.addClaimed(addReq(1, 5, claimPtr(10, 30, defaultMax)))
	if !c.checkClaimedResult(res[0], 1) {
		return
	}
	c.checkStoredClaim(res[0].Identity, 5, 30)
	rows := c.due(31, 0, 10)
	if len(rows) != 1 || rows[0].UpdateID != 1 {
		c.fatalf("Due(now 31ms) listed %v; want update 1, whose lease lapsed at 30ms", storedIDs(rows))
	}
	if !rows[0].ReceivedAt.Equal(at(5)) {
		c.errorf("Due(now 31ms) listed update 1 received at %s; want 5ms, its receipt (it was recorded claimed at 10ms)", offset(rows[0].ReceivedAt))
	}
}
