package capacity

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		parse func(string) (float64, error)
		in    string
		want  float64
	}{
		{ParseCount, "1000", 1000},
		{ParseCount, "1,000,000", 1e6},
		{ParseCount, "1_000", 1000},
		{ParseCount, "50k", 5e4},
		{ParseCount, "1M", 1e6},
		{ParseCount, "1.5M", 1.5e6},
		{ParseCount, " 2G ", 2e9},
		{ParseRate, "1/min", 1.0 / 60},
		{ParseRate, "20/s", 20},
		{ParseRate, "0.5", 0.5},
		{ParseRate, "30/h", 30.0 / 3600},
		{ParseBytes, "256", 256},
		{ParseBytes, "256B", 256},
		{ParseBytes, "4KiB", 4096},
		{ParseBytes, "4KB", 4000},
		{ParseBytes, "16GiB", 16 << 30},
		{ParseBytes, "1.5 MiB", 1.5 * (1 << 20)},
		{func(s string) (float64, error) { return ParsePercent(s, false) }, "50%", 0.5},
		{func(s string) (float64, error) { return ParsePercent(s, false) }, "0.3", 0.3},
		{func(s string) (float64, error) { return ParsePercent(s, false) }, "0%", 0},
		{func(s string) (float64, error) { return ParsePercent(s, true) }, "100%", 1},
	} {
		got, err := tc.parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%q: %g, %v; want %g", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		parse func(string) (float64, error)
		in    string
		want  string
	}{
		{ParseCount, "", `"" is not a count (write e.g. 1000, 50k or 1M)`},
		{ParseCount, "lots", `"lots" is not a count`},
		{ParseCount, "1T", `"1T" is not a count`},
		{ParseCount, "0", `"0" must be more than zero`},
		{ParseCount, "-5k", `"-5k" must be more than zero`},
		{ParseCount, "1e999", `is not a count`},
		{ParseRate, "1/day", `"1/day" has an unknown unit "day" (write e.g. 1/min, 20/s or 30/h)`},
		{ParseRate, "fast", `"fast" is not a rate`},
		{ParseRate, "0/s", `rate "0/s" must be more than zero`},
		{ParseRate, "/s", `"/s" is not a rate`},
		{ParseBytes, "4XB", `"4XB" is not a size (write e.g. 256, 4KiB or 16GiB)`},
		{ParseBytes, "-1KiB", `size "-1KiB" must be more than zero`},
		{func(s string) (float64, error) { return ParsePercent(s, false) }, "100%", `"100%" must lie between 0% and 99%`},
		{func(s string) (float64, error) { return ParsePercent(s, true) }, "120%", `"120%" must lie between 0% and 100%`},
		{func(s string) (float64, error) { return ParsePercent(s, false) }, "half", `"half" is not a percentage (write e.g. 50% or 0.5)`},
	} {
		_, err := tc.parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
			continue
		}
		if strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%q: the error is more than one line: %q", tc.in, err)
		}
	}
}
