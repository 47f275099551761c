//go:build linux

// Package loadtest simulates many chat clients against a scalechat server
// (or any plain WebSocket echo server) and records a CSV row for every
// message sent and received, so that per-recipient latency and loss can be
// computed afterwards (docs/csv.md; the formats are in internal/results).
//
// Clients live on a few event loops (internal/netpoll) rather than one
// goroutine each, so one process holds tens of thousands of connections and
// one core receives and records hundreds of thousands of messages a second.
//
// # Glossary
//
//   - Step: one load of a run (rooms, room size, rate, duration, ramp); a
//     scenario file is a list of steps run one after another (Config.Steps).
//   - Plan: what every client of a step does, the same in every process of
//     the run: its run-wide id, its rooms, whether it sends, when it
//     connects (stepPlan, plan.go). A message's wire id is the sender's id
//     and a counter, so any recipient knows who sent it.
//   - Shard: a part of the run given to one machine with --shard i/N; every
//     shard computes the same plan and runs the clients that fall to it.
//   - Worker: a child process of a run started with --workers, with its own
//     open-file limit and CSV part; the parent coordinates the workers'
//     steps (worker.go).
//   - Part: the clients one process runs, of one worker of one shard, and
//     the CSV file it writes (part.go). Config.Parts is shards × workers.
//   - Loop: an event loop of a part (loop*.go): it connects its clients
//     without blocking, reads the server's frames with ws.Reader, sends on
//     an open-loop schedule, and appends rows to its chunk of the CSV.
//   - Recorder: the part's one writer goroutine, which writes whole chunks
//     so the file only ever ends between rows (record.go).
//
// # Files
//
// config.go (the configuration and its checks), scenario.go (scenario
// files), plan.go, run.go (a run: workers or one part, meta.json, the
// summary), worker.go, part.go, loop.go, loop_connect.go, loop_receive.go,
// loop_send.go, poll.go (the HTTP transport's clients), record.go,
// progress.go (live progress), machine.go (the host's limits).
package loadtest
