package results

import "testing"

func TestOwed(t *testing.T) {
	at := func(t int64) int64 { return t }
	tests := []struct {
		name  string
		joins []int64
		due   int64
		want  int
	}{
		{"nobody in the room", nil, 100, 0},
		{"everyone joined before", []int64{10, 20, 30}, 100, 3},
		{"nobody joined yet", []int64{10, 20, 30}, 5, 0},
		{"a join at the due time is owed", []int64{10, 20, 30}, 20, 2},
		{"a join just after is not", []int64{10, 20, 30}, 19, 1},
		{"joins at the same instant count alike", []int64{10, 20, 20, 20, 30}, 20, 4},
		{"the sender alone", []int64{7}, 7, 1},
	}
	for _, tt := range tests {
		if got := Owed(tt.joins, at, tt.due); got != tt.want {
			t.Errorf("%s: Owed(%v, %d) = %d, want %d", tt.name, tt.joins, tt.due, got, tt.want)
		}
	}
	// The rows are the caller's: a Joined row read through joinedAt.
	type row struct {
		client uint64
		at     int64
	}
	rows := []row{{1, 100}, {2, 200}, {3, 300}}
	if n := Owed(rows, func(r row) int64 { return r.at }, 250); n != 2 || rows[n-1].client != 2 {
		t.Errorf("Owed over rows = %d", n)
	}
}
