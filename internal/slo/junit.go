package slo

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"time"
)

// Suite is one run's verdicts, written as one JUnit <testsuite>.
type Suite struct {
	Name      string    // e.g. "loadtest results/run.csv"
	Timestamp time.Time // when the run started
	Duration  time.Duration
	Hostname  string
	Results   []Result
	// Checks are the run's own checks that failed (loss beyond --max-loss,
	// connection errors…): each is a failed testcase "check N" of its own.
	Checks []string
}

// The XML shape is the one Jenkins' JUnit plugin (its junit-10.xsd) and
// GitLab's unit test reports read: <testsuites> holding <testsuite>s holding
// <testcase>s, a miss as <failure message type>, an inconclusive verdict as
// <error>: both fail the build there, as "skipped" would not.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Hostname  string      `xml:"hostname,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes suites as JUnit XML: a <testcase> per objective per
// step, named "STEP: SLO" with classname "scalechat.slo.STEP", a
// <failure> for a miss and an <error> for an inconclusive verdict, each
// with the measured value.
func WriteJUnit(w io.Writer, suites []Suite) error {
	doc := junitSuites{Name: "scalechat SLOs"}
	var total time.Duration
	for _, s := range suites {
		js := junitSuite{Name: s.Name, Time: seconds(s.Duration), Hostname: s.Hostname}
		if !s.Timestamp.IsZero() {
			js.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05")
		}
		for _, r := range s.Results {
			c := junitCase{Name: r.Step + ": " + Bare(r), Classname: "scalechat.slo." + r.Step, Time: "0", SystemOut: r.Reason}
			p := &junitProblem{Message: r.Reason, Text: fmt.Sprintf("SLO %s in step %s: measured %s (%s)", Bare(r), r.Step, r.Value, r.Verdict)}
			switch r.Verdict {
			case Missed:
				p.Type = "slo-missed"
				c.Failure = p
				js.Failures++
			case Inconclusive:
				p.Type = "slo-inconclusive"
				c.Error = p
				js.Errors++
			}
			js.Cases = append(js.Cases, c)
		}
		for i, c := range s.Checks {
			js.Cases = append(js.Cases, junitCase{Name: fmt.Sprintf("check %d", i+1), Classname: "scalechat.checks", Time: "0",
				Failure: &junitProblem{Message: c, Type: "check-failed", Text: c}})
			js.Failures++
		}
		js.Tests = len(js.Cases)
		doc.Tests += js.Tests
		doc.Failures += js.Failures
		doc.Errors += js.Errors
		total += s.Duration
		doc.Suites = append(doc.Suites, js)
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteJUnitFile writes suites to path (see WriteJUnit).
func WriteJUnitFile(path string, suites []Suite) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write JUnit file: %w", err)
	}
	if err := WriteJUnit(f, suites); err != nil {
		f.Close()
		return fmt.Errorf("write JUnit file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write JUnit file %s: %w", path, err)
	}
	return nil
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
