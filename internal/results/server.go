package results

// ServerHeader is the header row of a run's <out>.server.csv: the server's
// counters, scraped from its /metrics once a second during a load test.
const ServerHeader = "unix_us,node,cpu_seconds,rss_bytes,connections,messages_in,deliveries,processing_p50_ms,processing_p99_ms"
