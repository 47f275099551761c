package results

import "sort"

// Owed returns how many deliveries a message due at due (its Sent row's
// unix_us) is owed: the clients that had joined its room, in its step, at
// or before due, the sender included (docs/csv.md, "expected deliveries").
//
// joins are the room's Joined rows of that step, sorted by join time, and
// joinedAt reads a row's unix_us; the clients owed are joins[:Owed(…)].
// Every tool that counts expected deliveries (analyze, bench's split of
// deliveries by node) counts them here, so that they agree.
func Owed[J any](joins []J, joinedAt func(J) int64, due int64) int {
	return sort.Search(len(joins), func(i int) bool { return joinedAt(joins[i]) > due })
}
