package harness

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
)

// Figure is one measured number.
type Figure struct {
	Name  string
	Value float64
	Unit  string
	// Target is the figure's goal as written ("<= 1.2"); Goal and Max say how to
	// compare: the value must be <= Goal when Max, >= Goal otherwise.
	Target string
	Goal   float64
	Max    bool
	// Floor is the same-run floor the figure is compared with, if any.
	Floor string
	Note  string
	// Ours and Peer are set for a figure measured beside a peer runtime
	// (the cri group, value = ours ÷ peer): the two measurements as shown
	// side by side in RESULTS.md.
	Ours, Peer string
}

// HasGoal reports whether the figure has a numeric target.
func (f Figure) HasGoal() bool { return f.Target != "" && f.Goal != 0 }

// Met reports whether the target is met (true when there is none).
func (f Figure) Met() bool {
	switch {
	case !f.HasGoal():
		return true
	case f.Max:
		return f.Value <= f.Goal
	default:
		return f.Value >= f.Goal
	}
}

// Report collects figures and prints each as "name value unit" when added.
type Report struct {
	mu      sync.Mutex
	Out     io.Writer
	Figures []Figure
}

// Add records f and prints its line.
func (r *Report) Add(f Figure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Figures = append(r.Figures, f)
	if r.Out != nil {
		fmt.Fprintf(r.Out, "%s %s %s\n", f.Name, Num(f.Value), f.Unit)
	}
}

// Line adds a figure without target.
func (r *Report) Line(name string, v float64, unit string) {
	r.Add(Figure{Name: name, Value: v, Unit: unit})
}

// Num formats a value with a precision that suits its size.
func Num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
