package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseCount reads a count such as 1000, 1,000, 1_000, 50k, 1.5M or 2G
// (decimal multiples). It must be positive and finite.
func ParseCount(s string) (float64, error) {
	t := strings.NewReplacer(",", "", "_", "").Replace(strings.TrimSpace(s))
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'g', 'G':
			mult, t = 1e9, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a count (write e.g. 1000, 50k or 1M)", s)
	}
	if v*mult <= 0 {
		return 0, fmt.Errorf("%q must be more than zero", s)
	}
	return v * mult, nil
}

// ParseRate reads messages per second per user from N/s, N/min, N/h or a
// bare N (per second), e.g. 1/min, 20/s, 0.5/s.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, unit, ok := strings.Cut(t, "/")
	per := 1.0
	if ok {
		switch strings.TrimSpace(unit) {
		case "s", "sec", "second":
			per = 1
		case "min", "m", "minute":
			per = 60
		case "h", "hour":
			per = 3600
		default:
			return 0, fmt.Errorf("%q has an unknown unit %q (write e.g. 1/min, 20/s or 30/h)", s, unit)
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a rate (write e.g. 1/min, 20/s or 30/h)", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("rate %q must be more than zero", s)
	}
	return v / per, nil
}

// ParseBytes reads a size in bytes: 256, 256B, 4KiB, 4KB (1000), 1MiB,
// 16GiB, 16GB.
func ParseBytes(s string) (float64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, t = u.mult, strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (write e.g. 256, 4KiB or 16GiB)", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("size %q must be more than zero", s)
	}
	return v * mult, nil
}

// ParsePercent reads a fraction from 50% or 0.5; it must lie in [0, 1)
// when allowOne is false, [0, 1] otherwise.
func ParsePercent(s string, allowOne bool) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if strings.HasSuffix(t, "%") {
		t, div = strings.TrimSpace(strings.TrimSuffix(t, "%")), 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a percentage (write e.g. 50%% or 0.5)", s)
	}
	v /= div
	if v < 0 || v > 1 || (!allowOne && v == 1) {
		return 0, errPercentRange(s, allowOne)
	}
	return v, nil
}

func errPercentRange(s string, allowOne bool) error {
	if allowOne {
		return fmt.Errorf("%q must lie between 0%% and 100%%", s)
	}
	return fmt.Errorf("%q must lie between 0%% and 99%%", s)
}
