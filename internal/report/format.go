package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// scaled writes v in units of base (units[0] for v below base), with three
// significant digits: 23.5 GiB, 1.2 M. A value that rounds up to base moves
// to the next unit, so 999.96 k is 1 M, not 1000 k.
func scaled(v, base float64, units []string) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	u := 0
	for u < len(units)-1 && shown(v) >= base {
		v /= base
		u++
	}
	return sign + trimZeros(strconv.FormatFloat(v, 'f', sig3Decimals(v), 64)) + " " + units[u]
}

// sig3Decimals is the number of decimals that shows v (below 1000) with
// three significant digits.
func sig3Decimals(v float64) int {
	switch r := roundSig3(v); {
	case r >= 100:
		return 0
	case r >= 10:
		return 1
	}
	return 2
}

// shown is v as the text shows it.
func shown(v float64) float64 {
	p := math.Pow10(sig3Decimals(v))
	return math.Round(v*p) / p
}

func roundSig3(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow10(2 - int(math.Floor(math.Log10(v))))
	return math.Round(v*p) / p
}

// trimZeros drops the zeros a fixed number of decimals leaves: 1.50 is 1.5.
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// fmtBytes writes a size in binary units: 512 B, 1.5 KiB, 23.5 GiB.
func fmtBytes(v float64) string {
	return scaled(v, 1024, []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"})
}

// fmtCount writes a count for a reader: exact below 10 000, then with three
// significant digits and a unit: 12.3 k, 1.2 M, 25.3 G.
func fmtCount(v float64) string {
	if math.Abs(v) < 10_000 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := scaled(v, 1000, []string{"", "k", "M", "G", "T", "P"})
	return strings.TrimSuffix(s, " ")
}

// fmtNumber writes a number that is not a count: integers as counts, other
// values with four significant digits and no exponent below 10^15.
func fmtNumber(v float64) string {
	if (v == math.Trunc(v) || math.Abs(v) >= 10_000) && math.Abs(v) < 1e15 {
		return fmtCount(v)
	}
	if a := math.Abs(v); a >= 1e-3 && a < 1e15 {
		return trimZeros(strconv.FormatFloat(v, 'f', max(0, 3-int(math.Floor(math.Log10(a)))), 64))
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// fmtPct writes a ratio as a percentage with as many decimals as it takes
// not to show 100% for a ratio short of 1 (nor 0% for one above 0), up to
// six.
func fmtPct(r float64) string {
	p := 100 * r
	d := 2
	for ; d < 6; d++ {
		s := strconv.FormatFloat(p, 'f', d, 64)
		if (r < 1 && s == strconv.FormatFloat(100, 'f', d, 64)) || (r > 0 && s == strconv.FormatFloat(0, 'f', d, 64)) {
			continue
		}
		break
	}
	return trimZeros(strconv.FormatFloat(p, 'f', d, 64)) + "%"
}

// toFloat takes the numbers the pages' data hold.
func toFloat(v any) (float64, error) {
	switch v := v.(type) {
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case uint64:
		return float64(v), nil
	case float64:
		return v, nil
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

// count is fmtCount as a cell's content, the exact value in its tooltip
// when the text rounds it. v is an integer or a float64.
func count(v any) (template.HTML, error) {
	f, err := toFloat(v)
	if err != nil {
		return "", fmt.Errorf("count: %w", err)
	}
	s, exact := fmtCount(f), strconv.FormatFloat(f, 'f', -1, 64)
	if s == exact {
		return template.HTML(s), nil
	}
	return template.HTML(`<span title="` + exact + `">` + s + `</span>`), nil
}

// size is fmtBytes for a template: v is an integer or a float64.
func size(v any) (string, error) {
	f, err := toFloat(v)
	if err != nil {
		return "", fmt.Errorf("bytes: %w", err)
	}
	return fmtBytes(f), nil
}

// when writes a time for the page, or nothing for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// field is one member of a JSON object, in the order the object lists it.
type field struct {
	Key string
	Val any // string, json.Number, bool, nil, []field (an object) or []any (an array)
}

// fieldsOf returns the JSON members of v in their order (Go's maps would
// sort them: p50, p90, p99, max would read max, p50, p90, p99).
func fieldsOf(v any) ([]field, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	val, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("decode %T: %w", v, err)
	}
	fs, ok := val.([]field)
	if !ok {
		return nil, fmt.Errorf("%T is not a JSON object", v)
	}
	return fs, nil
}

// decodeValue reads one JSON value, objects as []field.
func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		fs := []field{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			fs = append(fs, field{Key: k.(string), Val: v})
		}
		_, err := dec.Token() // }
		return fs, err
	case json.Delim('['):
		vs := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
		_, err := dec.Token() // ]
		return vs, err
	}
	return tok, nil
}

// valueHTML writes a JSON value for a cell. key names it (its unit comes
// from the name's suffix: _bytes, _ms, _ratio); an object is a small table of its
// members, never Go's map[k:v …].
func valueHTML(key string, v any) template.HTML {
	esc := template.HTMLEscapeString
	switch v := v.(type) {
	case []field:
		var b strings.Builder
		b.WriteString(`<table class="nested">`)
		for _, f := range v {
			k := f.Key
			if strings.HasSuffix(key, "_ms") && !strings.HasSuffix(k, "_ms") {
				k += "_ms" // the members of latency_ms are milliseconds
			}
			fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>", esc(f.Key), valueHTML(k, f.Val))
		}
		b.WriteString("</table>")
		return template.HTML(b.String())
	case []any:
		// Words (arguments, file names) read as a command line, other
		// values as a list.
		parts, sep := make([]string, len(v)), " "
		for i, x := range v {
			parts[i] = string(valueHTML(key, x))
			if _, ok := x.(string); !ok {
				sep = ", "
			}
		}
		return template.HTML(strings.Join(parts, sep))
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return template.HTML(esc(v.String()))
		}
		switch {
		case strings.HasSuffix(key, "_bytes"):
			return template.HTML(esc(fmtBytes(f)))
		case strings.HasSuffix(key, "_ms"):
			return template.HTML(esc(fmtMs(f)))
		case strings.HasSuffix(key, "_ratio"):
			return template.HTML(esc(fmtPct(f)))
		}
		return template.HTML(esc(fmtNumber(f)))
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case nil:
		return ""
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return template.HTML(esc(when(t)))
		}
		return template.HTML(esc(v))
	}
	return template.HTML(esc(fmt.Sprint(v)))
}
