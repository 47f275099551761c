// Package results defines the files of the load-testing lab (docs/csv.md):
// the events CSV that every simulated client writes a row to, the run's
// meta.json, the server metrics CSV scraped during a run, the analysis's
// summary and time series, and the results of the transport and targets
// comparisons.
//
// Every writer and reader of those files takes its headers, event names and
// types from here, so that renaming a column is one edit the compiler
// follows. The analyzer keeps its own zero-allocation row parser for speed;
// it, too, takes the header and event names from this package.
package results
