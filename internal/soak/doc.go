// Package soak holds the soak test of scalechat serve: clients join, talk
// and leave for a bounded time while the server's goroutines, open files
// and memory are sampled every second; the test fails when any of them
// keeps growing, or does not come back down once the clients are gone.
//
//	go test ./internal/soak                                  # 20 s, as in CI
//	go test ./internal/soak -soak.duration 10m -v -soak.csv /tmp/soak.csv
package soak
