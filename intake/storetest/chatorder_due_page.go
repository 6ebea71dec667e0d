package storetest

import "slices"

// chatDuePageRule is the rule of chatOrderDueChatPage.
const chatDuePageRule = "a strict listing of one chat holds that chat's claimable rows up to its limit: due rows of other chats and rows without a chat never take its places"

// chatOrderDueChatPage: DueInOrder with a chat lists only rows of that
// chat, and its page is cut after that filter, never before: the intake
// asks for the next update of a chat whose update it just settled, with a
// small limit, and a store that counted other chats' due rows against the
// page (a LIMIT before the chat condition) would answer none while the
// chat's next update is due. Updates 1 to 3, of chats "b", "c" and "d",
// and update 4, without a chat, are due and first of their chats; update
// 5 of chat "a" is due and holds update 6 of its chat. Each page of chat
// "a" is [5]; each page of every chat is the first of 1 to 5 up to its
// limit.
func chatOrderDueChatPage(c *checker) {
	c.addChat(1, "b", 0)
	c.addChat(2, "c", 0)
	c.addChat(3, "d", 0)
	c.mustAdd(4, 0)
	c.addChat(5, "a", 0)
	c.addChat(6, "a", 0)
	all := []int64{1, 2, 3, 4, 5}
	for _, limit := range []int{1, 2, 5, 10} {
		if got := c.strictDue(10, 10, limit, "a"); !slices.Equal(got, []int64{5}) {
			c.errorf("DueInOrder(now 10ms, limit %d, chat \"a\") = %v; want [5]: update 5 is chat a's first row and due, updates 1 to 4 are of other chats or none", limit, got)
		}
		want := all[:min(limit, len(all))]
		if got := c.strictDue(10, 10, limit, ""); !slices.Equal(got, want) {
			c.errorf("DueInOrder(now 10ms, limit %d, every chat) = %v; want %v: update 6 waits for update 5 of its chat", limit, got, want)
		}
	}
}
