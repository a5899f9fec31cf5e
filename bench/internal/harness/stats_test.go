package harness

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}, {10, 1}, {11, 2}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Median(xs); got != 5.5 {
		t.Errorf("Median = %v, want 5.5", got)
	}
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median odd = %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Median(nil)) {
		t.Error("empty input must give NaN")
	}
	if xs[0] != 5 {
		t.Error("input was sorted in place")
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{3: "3", 1.23456: "1.235", 123.456: "123.5", 0.000271: "0.000271", math.NaN(): "NaN"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFigureMet(t *testing.T) {
	f := Figure{Value: 1.3, Target: "<= 1.2", Goal: 1.2, Max: true}
	if f.Met() {
		t.Error("1.3 <= 1.2 met")
	}
	f.Value = 1.2
	if !f.Met() {
		t.Error("1.2 <= 1.2 not met")
	}
	if !(Figure{Value: 7}).Met() {
		t.Error("a figure without target is met")
	}
}
