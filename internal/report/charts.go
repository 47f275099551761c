package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/scalechat/scalechat/internal/results"
)

// Chart size: 16 × 9 inches, PNG at 100 dpi (1600 × 900 px, a slide), with
// fonts sized for a projected slide.
const (
	Width     = 16 * vg.Inch
	Height    = 9 * vg.Inch
	DPI       = 100
	PNGWidth  = 1600
	PNGHeight = 900
)

var (
	colorCut  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorMain = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorAlt  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorOK   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// newPlot returns a plot with slide-sized text; small is for panels of
// small multiples.
func newPlot(title, x, y string, small bool) *plot.Plot {
	p := plot.New()
	sz := func(big, sm float64) font.Length {
		if small {
			return font.Length(sm)
		}
		return font.Length(big)
	}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = sz(24, 17)
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.X.Label.TextStyle.Font.Size = sz(19, 14)
	p.Y.Label.TextStyle.Font.Size = sz(19, 14)
	p.X.Tick.Label.Font.Size = sz(16, 12)
	p.Y.Tick.Label.Font.Size = sz(16, 12)
	p.Legend.TextStyle.Font.Size = sz(16, 13)
	p.Legend.Top = true
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), -vg.Points(6)
	p.Legend.Padding = vg.Points(4)
	p.Add(plotter.NewGrid())
	return p
}

// save renders fn as name.png (PNGWidth × PNGHeight) and name.svg in dir.
func save(dir, name string, fn func(draw.Canvas)) error {
	img := vgimg.NewWith(vgimg.UseWH(Width, Height), vgimg.UseDPI(DPI))
	fill(draw.New(img), fn)
	if err := writeFile(filepath.Join(dir, name+".png"), vgimg.PngCanvas{Canvas: img}); err != nil {
		return err
	}
	svg := vgsvg.New(Width, Height)
	fill(draw.New(svg), fn)
	return writeFile(filepath.Join(dir, name+".svg"), svg)
}

func fill(dc draw.Canvas, fn func(draw.Canvas)) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	fn(dc)
}

func writeFile(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// margin keeps labels off the image's edge.
var margin = vg.Points(18)

// savePlot saves a single plot.
func savePlot(dir, name string, p *plot.Plot) error {
	return save(dir, name, func(dc draw.Canvas) { p.Draw(draw.Crop(dc, margin, -margin, margin, -margin)) })
}

// nominal labels the x positions 0 … n-1 with some room either side.
func nominal(p *plot.Plot, names []string) {
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
}

// saveGrid saves plots as a grid of rows × cols panels under a title.
func saveGrid(dir, name, title string, plots [][]*plot.Plot) error {
	return save(dir, name, func(dc draw.Canvas) {
		// Title band at the top.
		sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 24), XAlign: draw.XCenter,
			YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
		dc.FillText(sty, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(8)}, title)
		body := draw.Crop(dc, margin, -margin, margin, -vg.Points(48))
		tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Points(24), PadY: vg.Points(18),
			PadTop: vg.Points(4), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12)}
		canvases := plot.Align(plots, tiles, body)
		for j := range plots {
			for i, p := range plots[j] {
				if p != nil {
					p.Draw(canvases[j][i])
				}
			}
		}
	})
}

// stepLabel names a step on an axis.
func stepLabel(s results.StepStats) string {
	l := s.Step
	if s.Clients > 0 {
		l += "\n" + strconv.FormatInt(s.Clients, 10) + " clients"
	}
	if s.Saturated {
		l += "\nSATURATED"
	}
	return l
}

// percentileBars lists the bars of chart 1: p10 … p90, p95, p99.
func percentileBars(l *results.Latency) (names []string, ms []float64) {
	for _, p := range l.Percentiles() {
		if p.Name == "p99.9" {
			continue
		}
		names = append(names, p.Name)
		ms = append(ms, p.Ms)
	}
	return names, ms
}

// latencyPanels draws chart 1: one panel per step, bars p10 … p99, the y
// axis cut at capMs with cut bars red and labelled with their value.
func latencyPanels(dir string, steps []results.StepStats, capMs float64) error {
	n := len(steps)
	cols := int(math.Ceil(math.Sqrt(float64(n))))
	cols = min(max(cols, 1), 4)
	rows := (n + cols - 1) / cols
	ymax := 0.0
	for i := range steps {
		_, v := percentileBars(&steps[i].Latency)
		for _, x := range v {
			ymax = max(ymax, x)
		}
	}
	cut := ymax > capMs
	top := min(ymax, capMs) * 1.15
	if top <= 0 {
		top = 1
	}
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
	}
	for i := range steps {
		s := &steps[i]
		title := fmt.Sprintf("%s (%d clients)", s.Step, s.Clients)
		if s.Saturated {
			title += " SATURATED"
		}
		p := newPlot(title, "", "latency (ms)", true)
		if s.Saturated {
			p.Title.TextStyle.Color = colorCut
		}
		names, v := percentileBars(&s.Latency)
		under := make(plotter.Values, len(v))
		over := make(plotter.Values, len(v))
		var labels plotter.XYLabels
		for k, x := range v {
			if x > capMs {
				over[k] = capMs
				labels.XYs = append(labels.XYs, plotter.XY{X: float64(k), Y: capMs})
				labels.Labels = append(labels.Labels, fmtMs(x))
			} else {
				under[k] = x
			}
		}
		w := vg.Points(22)
		b1, err := plotter.NewBarChart(under, w)
		if err != nil {
			return err
		}
		b1.Color, b1.LineStyle.Width = colorMain, 0
		b2, err := plotter.NewBarChart(over, w)
		if err != nil {
			return err
		}
		b2.Color, b2.LineStyle.Width = colorCut, 0
		p.Add(b1, b2)
		if len(labels.Labels) > 0 {
			lb, err := plotter.NewLabels(labels)
			if err != nil {
				return err
			}
			for k := range lb.TextStyle {
				lb.TextStyle[k].Font.Size = 13
				lb.TextStyle[k].Color = colorCut
				lb.TextStyle[k].XAlign = draw.XCenter
				lb.TextStyle[k].YAlign = draw.YBottom
			}
			p.Add(lb)
		}
		if cut {
			line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: capMs}, {X: float64(len(v)) - 0.5, Y: capMs}})
			if err != nil {
				return err
			}
			line.Color, line.Dashes, line.Width = colorCut, []vg.Length{vg.Points(6), vg.Points(4)}, vg.Points(1.5)
			p.Add(line)
		}
		nominal(p, names)
		p.Y.Min, p.Y.Max = 0, top
		grid[i/cols][i%cols] = p
	}
	for r := range grid { // empty cells: blank plots keep the grid aligned
		for c := range grid[r] {
			if grid[r][c] == nil {
				p := plot.New()
				p.HideAxes()
				grid[r][c] = p
			}
		}
	}
	title := "Delivery latency percentiles per step"
	if cut {
		title += fmt.Sprintf(" (y cut at %s: red bars are cut, labelled with their value)", fmtMs(capMs))
	}
	return saveGrid(dir, "latency_percentiles", title, grid)
}

// fmtMs prints a latency for a label.
func fmtMs(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'g', 3, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
}

// floorLog keeps values drawable on a log axis.
const floorLog = 0.001

// percentilesByStep draws chart 2: p50, p90, p99 against the step, log y.
func percentilesByStep(dir string, steps []results.StepStats) error {
	p := newPlot("Latency p50 / p90 / p99 per step (log scale)", "step", "latency (ms, log scale)", false)
	lo, hi := math.Inf(1), 0.0
	for k, get := range []func(results.StepStats) float64{
		func(s results.StepStats) float64 { return s.P50 },
		func(s results.StepStats) float64 { return s.P90 },
		func(s results.StepStats) float64 { return s.P99 },
	} {
		xys := make(plotter.XYs, len(steps))
		for i, s := range steps {
			v := max(get(s), floorLog)
			xys[i] = plotter.XY{X: float64(i), Y: v}
			lo, hi = min(lo, v), max(hi, v)
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotutil.Color(k), vg.Points(3)
		pts.Color, pts.Shape, pts.Radius = plotutil.Color(k), plotutil.Shape(k), vg.Points(5)
		p.Add(l, pts)
		p.Legend.Add([]string{"p50", "p90", "p99"}[k], l, pts)
	}
	logAxis(&p.Y, lo/2, hi*2)
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = stepLabel(s)
	}
	nominal(p, names)
	p.X.Label.Text = ""
	return savePlot(dir, "percentiles_by_step", p)
}

// meanErrs is points with error bars.
type meanErrs struct {
	plotter.XYs
	plotter.YErrors
}

// meanStddev draws chart 3: mean latency ± one standard deviation per step.
func meanStddev(dir string, steps []results.StepStats) error {
	p := newPlot("Mean delivery latency ± one standard deviation per step", "", "latency (ms)", false)
	d := meanErrs{XYs: make(plotter.XYs, len(steps)), YErrors: make(plotter.YErrors, len(steps))}
	top := 0.0
	for i, s := range steps {
		d.XYs[i] = plotter.XY{X: float64(i), Y: s.Mean}
		// The lower bar stops at 0: a latency is never negative.
		d.YErrors[i].Low, d.YErrors[i].High = math.Min(s.Stddev, s.Mean), s.Stddev
		top = max(top, s.Mean+s.Stddev)
	}
	eb, err := plotter.NewYErrorBars(d)
	if err != nil {
		return err
	}
	eb.LineStyle.Width, eb.LineStyle.Color, eb.CapWidth = vg.Points(2.5), colorMain, vg.Points(18)
	sc, err := plotter.NewScatter(d.XYs)
	if err != nil {
		return err
	}
	sc.Color, sc.Shape, sc.Radius = colorAlt, draw.CircleGlyph{}, vg.Points(7)
	p.Add(eb, sc)
	p.Legend.Add("mean", sc)
	p.Legend.Add("± stddev", &plotter.Line{LineStyle: eb.LineStyle}) // error bars have no legend thumbnail
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = stepLabel(s)
	}
	nominal(p, names)
	p.Y.Min, p.Y.Max = 0, max(top*1.1, 0.001)
	return savePlot(dir, "mean_stddev", p)
}

// sentReceived draws chart 4: messages sent, and deliveries expected and
// received, per step (two panels: their scales differ by the room size).
func sentReceived(dir string, steps []results.StepStats) error {
	names := make([]string, len(steps))
	sent := make(plotter.Values, len(steps))
	exp := make(plotter.Values, len(steps))
	recv := make(plotter.Values, len(steps))
	for i, s := range steps {
		names[i] = stepLabel(s)
		sent[i], exp[i], recv[i] = float64(s.Sent), float64(s.Expected), float64(s.Received)
	}
	w := vg.Points(math.Min(60, 500/float64(len(steps)+1)))
	left := newPlot("Messages sent", "", "messages", true)
	b, err := plotter.NewBarChart(sent, w)
	if err != nil {
		return err
	}
	b.Color, b.LineStyle.Width = colorMain, 0
	left.Add(b)
	nominal(left, names)
	left.Y.Min, left.Y.Max = 0, maxOf(sent)*1.15+1
	left.Y.Tick.Marker = countTicks{}

	right := newPlot("Deliveries expected vs received", "", "deliveries", true)
	be, err := plotter.NewBarChart(exp, w/2)
	if err != nil {
		return err
	}
	be.Color, be.LineStyle.Width, be.Offset = colorAlt, 0, -w/4
	br, err := plotter.NewBarChart(recv, w/2)
	if err != nil {
		return err
	}
	br.Color, br.LineStyle.Width, br.Offset = colorOK, 0, w/4
	right.Add(be, br)
	right.Legend.Add("expected", be)
	right.Legend.Add("received", br)
	nominal(right, names)
	right.Y.Min, right.Y.Max = 0, max(maxOf(exp), maxOf(recv))*1.2+1
	right.Y.Tick.Marker = countTicks{}
	return saveGrid(dir, "sent_received", "Sent vs received per step", [][]*plot.Plot{{left, right}})
}

func maxOf(v plotter.Values) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// countTicks labels counts as 1.5k, 2M, … instead of 1500000.00.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = siCount(ts[i].Value)
		}
	}
	return ts
}

func siCount(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 4, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// overTime draws chart 5: deliveries per second and p99 over time, one line
// per step on the run's time axis.
func overTime(dir string, steps []results.StepStats, series []results.SeriesPoint) error {
	if len(series) == 0 {
		return fmt.Errorf("no time series")
	}
	t0 := series[0].UnixUS
	for _, p := range series {
		t0 = min(t0, p.UnixUS)
	}
	byStep := make(map[string][]results.SeriesPoint)
	for _, p := range series {
		byStep[p.Step] = append(byStep[p.Step], p)
	}
	rate := newPlot("Deliveries per second over time", "time since start of run (s)", "deliveries / s", false)
	p99 := newPlot("Delivery latency p99 over time (log scale)", "time since start of run (s)", "p99 latency (ms, log scale)", false)
	lo, hi := math.Inf(1), 0.0
	for k, s := range steps {
		pts := byStep[s.Step]
		if len(pts) == 0 {
			continue
		}
		r := make(plotter.XYs, 0, len(pts))
		q := make(plotter.XYs, 0, len(pts))
		for _, p := range pts {
			x := float64(p.UnixUS-t0) / 1e6
			r = append(r, plotter.XY{X: x, Y: p.PerSecond})
			if p.Deliveries > 0 {
				v := max(p.P99Ms, floorLog)
				q = append(q, plotter.XY{X: x, Y: v})
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		label := s.Step
		if s.Saturated {
			label += " (saturated)"
		}
		l, err := plotter.NewLine(r)
		if err != nil {
			return err
		}
		l.Color, l.Width = plotutil.Color(k), vg.Points(2)
		rate.Add(l)
		rate.Legend.Add(label, l)
		if len(q) > 0 {
			l2, err := plotter.NewLine(q)
			if err != nil {
				return err
			}
			l2.Color, l2.Width = plotutil.Color(k), vg.Points(2)
			p99.Add(l2)
			p99.Legend.Add(label, l2)
		}
	}
	rate.Y.Min = 0
	rate.Y.Max *= 1.15 // room for the legend
	rate.Y.Tick.Marker = countTicks{}
	if hi > 0 {
		logAxis(&p99.Y, lo/2, hi*2)
	}
	if err := savePlot(dir, "deliveries_over_time", rate); err != nil {
		return err
	}
	return savePlot(dir, "p99_over_time", p99)
}

// serverCharts draws chart 6: server CPU, memory and processing time over
// time, one line per node.
func serverCharts(dir string, rows []results.ServerRow) error {
	t0 := rows[0].UnixUS
	byNode := make(map[string][]results.ServerRow)
	var nodes []string
	for _, r := range rows {
		t0 = min(t0, r.UnixUS)
		if _, ok := byNode[r.Node]; !ok {
			nodes = append(nodes, r.Node)
		}
		byNode[r.Node] = append(byNode[r.Node], r)
	}
	cpu := newPlot("Server CPU over time", "time since first scrape (s)", "CPU (% of one core)", false)
	mem := newPlot("Server memory (RSS) over time", "time since first scrape (s)", "RSS (MB)", false)
	proc := newPlot("Server message processing time over time", "time since first scrape (s)", "processing time (ms)", false)
	for k, n := range nodes {
		rs := byNode[n]
		var c, m, p50, p99 plotter.XYs
		// A figure a scrape lacked is NaN: no point (gonum refuses NaN).
		point := func(xys *plotter.XYs, x, y float64) {
			if !math.IsNaN(y) {
				*xys = append(*xys, plotter.XY{X: x, Y: y})
			}
		}
		for i, r := range rs {
			x := float64(r.UnixUS-t0) / 1e6
			point(&m, x, r.RSSBytes/1e6)
			point(&p50, x, r.ProcessingP50)
			point(&p99, x, r.ProcessingP99)
			if i > 0 && r.UnixUS > rs[i-1].UnixUS {
				// Rates are differences of consecutive counters.
				dt := float64(r.UnixUS-rs[i-1].UnixUS) / 1e6
				point(&c, x, 100*(r.CPUSeconds-rs[i-1].CPUSeconds)/dt)
			}
		}
		add := func(p *plot.Plot, xys plotter.XYs, label string, dashes []vg.Length) error {
			if len(xys) == 0 {
				return nil
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = plotutil.Color(k), vg.Points(2), dashes
			p.Add(l)
			p.Legend.Add(label, l)
			return nil
		}
		dash := []vg.Length{vg.Points(8), vg.Points(5)}
		for _, e := range []error{
			add(cpu, c, n, nil), add(mem, m, n, nil),
			add(proc, p50, n+" p50", nil), add(proc, p99, n+" p99", dash),
		} {
			if e != nil {
				return e
			}
		}
	}
	for _, p := range []*plot.Plot{cpu, mem, proc} {
		p.Y.Min = 0
	}
	if err := savePlot(dir, "server_cpu", cpu); err != nil {
		return err
	}
	if err := savePlot(dir, "server_memory", mem); err != nil {
		return err
	}
	return savePlot(dir, "server_processing", proc)
}
