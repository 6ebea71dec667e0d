package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Chart geometry: one SVG unit per bucket across, chartHeight units high.
const chartHeight = 40

// chart is one series drawn for the Overview.
type chart struct {
	Name    string  // "accepted"
	Label   string  // "Accepted/s"
	PerSec  bool    // values are shown as rates
	Now     float64 // the last complete bucket, per second when PerSec
	Peak    float64 // the highest bucket, per second when PerSec
	Hour    uint64  // events in the buckets drawn
	Total   uint64  // events since the recorder started
	Width   int     // viewBox width: the number of buckets
	Height  int
	Area    string // SVG path data of the filled area
	Line    string // SVG path data of the top line
	Summary string // the chart in words, for screen readers and no-SVG
}

// newChart draws buckets (oldest first, the last one in progress) as an
// area under a line scaled to the highest bucket.
func newChart(s Series, label string, perSec bool, buckets []uint32, total uint64) chart {
	c := chart{Name: s.String(), Label: label, PerSec: perSec, Total: total, Width: len(buckets), Height: chartHeight}
	var peak uint32
	for _, b := range buckets {
		c.Hour += uint64(b)
		peak = max(peak, b)
	}
	scale := func(v uint32) float64 {
		if perSec {
			return float64(v) / BucketWidth.Seconds()
		}
		return float64(v)
	}
	c.Peak = scale(peak)
	if n := len(buckets); n >= 2 {
		c.Now = scale(buckets[n-2])
	}
	y := func(v uint32) string {
		if peak == 0 {
			return strconv.Itoa(chartHeight)
		}
		// Leave a unit at the top so the peak's line is not clipped.
		return strconv.FormatFloat(float64(chartHeight)-float64(v)/float64(peak)*float64(chartHeight-1), 'f', 1, 64)
	}
	var line, area strings.Builder
	fmt.Fprintf(&area, "M0,%d", chartHeight)
	prev := ""
	for i, b := range buckets {
		// Each bucket is a flat step one unit wide; a run of equal
		// buckets is one step.
		yy := y(b)
		switch {
		case i == 0:
			fmt.Fprintf(&line, "M0,%s", yy)
			fmt.Fprintf(&area, "V%s", yy)
		case yy != prev:
			fmt.Fprintf(&line, "H%dV%s", i, yy)
			fmt.Fprintf(&area, "H%dV%s", i, yy)
		}
		prev = yy
	}
	fmt.Fprintf(&line, "H%d", len(buckets))
	fmt.Fprintf(&area, "H%dV%dZ", len(buckets), chartHeight)
	c.Line, c.Area = line.String(), area.String()
	unit := ""
	if perSec {
		unit = "/s"
	}
	c.Summary = fmt.Sprintf("%s over the last %v: %d events, peak %s%s, last %s %s%s",
		s, time.Duration(len(buckets))*BucketWidth, c.Hour, fmtRate(c.Peak), unit, BucketWidth, fmtRate(c.Now), unit)
	return c
}

// fmtRate prints a rate with at most one decimal.
func fmtRate(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
