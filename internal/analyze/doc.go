// Package analyze turns load-test CSVs (docs/csv.md), gigabytes of them,
// into latency percentiles, mean and deviation, losses, rates and a time
// series per step, in one pass and with memory bounded by the messages in
// flight rather than by the size of the files.
//
// A row flows: input.go finds the files and their format (the current one,
// or the older headerless one with any text as ids); a reader per file cuts
// it into line-aligned chunks; merge (pipeline.go) hands chunks to the
// parsers in time order across files; each parser reads rows with the
// zero-allocation ParseRow (parse.go) and splits their events by a hash of
// the message into partitions; each partition (partition.go) joins a
// message's Sent row with its Received rows and its room's Joined rows in
// an open-addressing table (table.go) and accumulates the statistics
// (hist.go); assemble (result.go) merges the partitions into a Result,
// whose files (summary.csv, summary.json, timeseries.csv) internal/results
// writes and reads; output.go prints the table.
//
// The header and event names come from internal/results, which also writes
// the rows; a test checks the parser reads what it writes.
package analyze
