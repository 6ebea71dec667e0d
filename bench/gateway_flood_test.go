package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestGatewayFloodShort runs the gateway-flood scenario through the built
// serve at Telegram's limits with a dozen messages (a few seconds: the
// busiest private chat gets 5, so it waits for its window once), and
// checks what any gateway must do at that size: no 429 reaches the app,
// every message arrives once, in its chat's order, and the RESULT line
// carries the keys BENCHMARKS.md quotes.
func TestGatewayFloodShort(t *testing.T) {
	ctx, bin, _ := buildForTest(t)
	var out bytes.Buffer
	err := runGatewayFlood(ctx, []string{"-bin", bin, "-messages", "12", "-workers", "4", "-privates", "2", "-groups", "1",
		"-group-share", "0.25", "-quiet-every", "1s", "-timeout", "1m", "-late-arrival", "5s"}, &out)
	if err != nil {
		t.Fatalf("gateway-flood: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "RESULT gateway-flood ") {
		t.Fatalf("last line %q, want the RESULT line\n%s", last, out.String())
	}
	for _, want := range []string{" app_429=0 ", " in_chat=12 ", " sent=12 ", " duplicates=0 ", " order_violations=0 ", " no_answer=0 ", " ok_not_in_chat=0 "} {
		if !strings.Contains(last, want) {
			t.Errorf("RESULT line lacks %q: %s", want, last)
		}
	}
	for _, key := range []string{"wall_s=", "min_s=", "wall_vs_min=", "quiet_p99_s=", "no_answer_in_chat=", "goal_wall="} {
		if !strings.Contains(last, key) {
			t.Errorf("RESULT line lacks %s: %s", key, last)
		}
	}
}

// TestFloodPlanMinimum checks the spread of the messages over the chats,
// each chat's queue, and the limit-bound minimum the wall time is held
// against.
func TestFloodPlanMinimum(t *testing.T) {
	for _, tc := range []struct {
		name           string
		plan           floodPlan
		privates, grps []int // messages a chat may get
		want           time.Duration
		binding        string
	}{
		// 60 a chat. A group at 5 per 5 s and 20 a minute: its 41st to
		// 60th go 120–135 s after its first; 3,000 at 30/s: the last
		// 99 s after the first; 60 in a private chat at 5 per 5 s: 55 s.
		{"default", floodPlan{messages: 3000, privates: 40, groups: 10, groupShare: 0.2},
			[]int{60}, []int{60}, 135 * time.Second, "the busiest group's limit"},
		// 30 a group: the 21st at a minute; 67–68 a private chat at 5
		// per 5 s: the 68th at 13 windows, 65 s.
		{"bot binds", floodPlan{messages: 3000, privates: 40, groups: 10, groupShare: 0.1},
			[]int{67, 68}, []int{30}, 99 * time.Second, "the bot's limit"},
		// 11 in one private chat at 5 per 5 s: the 11th at 10 s.
		{"one chat", floodPlan{messages: 11, privates: 1},
			[]int{11}, nil, 10 * time.Second, "the busiest private chat's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.plan.validate(); err != nil {
				t.Fatal(err)
			}
			var chats []*floodChat
			for i, n := range spread(tc.plan.messages-tc.plan.groupMessages(), tc.plan.privates) {
				chats = append(chats, &floodChat{id: int64(i + 1), jobs: make([]*floodJob, n)})
			}
			for i, n := range spread(tc.plan.groupMessages(), tc.plan.groups) {
				chats = append(chats, &floodChat{id: -int64(i + 1), group: true, jobs: make([]*floodJob, n)})
			}
			layoutJobs(chats)
			jobs := allJobs(chats)
			if len(jobs) != tc.plan.messages {
				t.Fatalf("%d jobs, want %d", len(jobs), tc.plan.messages)
			}
			for i, j := range jobs {
				if j.id != i {
					t.Fatalf("job %d has id %d", i, j.id)
				}
			}
			for _, c := range chats {
				for k, j := range c.jobs {
					if j.seq != k || j.chat != c.id || j.group != c.group {
						t.Fatalf("chat %d: job %d is %+v", c.id, k, j)
					}
				}
				want := tc.privates
				if c.group {
					want = tc.grps
				}
				if n := len(c.jobs); !slices.Contains(want, n) {
					t.Errorf("chat %d (group %t) gets %d messages, want one of %v", c.id, c.group, n, want)
				}
			}
			m := tc.plan.minimum(jobs, floodLimits, 0)
			if m.value() != tc.want || m.binding() != tc.binding {
				t.Errorf("minimum %v set by %s, want %v set by %s (%+v)", m.value(), m.binding(), tc.want, tc.binding, m)
			}
		})
	}
}

// TestInterleaveChats checks the first turn's order: the groups spread
// evenly among the private chats, every chat once.
func TestInterleaveChats(t *testing.T) {
	var chats []*floodChat
	for i := range 8 {
		chats = append(chats, &floodChat{id: int64(i + 1)})
	}
	for i := range 2 {
		chats = append(chats, &floodChat{id: -int64(i + 1), group: true})
	}
	var got []int64
	for _, c := range interleaveChats(chats) {
		got = append(got, c.id)
	}
	want := []int64{1, 2, 3, 4, -1, 5, 6, 7, 8, -2}
	if !slices.Equal(got, want) {
		t.Errorf("first turn %v, want %v", got, want)
	}
}

// TestWindowMin checks the bound of the earliest schedule under one limit
// and under two at once.
func TestWindowMin(t *testing.T) {
	three := telegramtest.Limit{Count: 3, Per: time.Second}
	for n, want := range map[int]time.Duration{0: 0, 1: 0, 3: 0, 4: time.Second, 6: time.Second, 7: 2 * time.Second} {
		if got := windowMin(n, three); got != want {
			t.Errorf("windowMin(%d, 3 per 1s) = %v, want %v", n, got, want)
		}
	}
	// 2 per second and 4 per 10 s: 0, 0, 1, 1, then the 5th waits for
	// the first to leave the 10 s window.
	ten := telegramtest.Limit{Count: 4, Per: 10 * time.Second}
	two := telegramtest.Limit{Count: 2, Per: time.Second}
	for n, want := range map[int]time.Duration{4: time.Second, 5: 10 * time.Second, 7: 11 * time.Second, 9: 20 * time.Second} {
		if got := windowMin(n, two, ten); got != want {
			t.Errorf("windowMin(%d, 2 per 1s, 4 per 10s) = %v, want %v", n, got, want)
		}
	}
}
