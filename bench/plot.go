package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strconv"
)

// Series is one line of a plot: a name and one value per x label.
type Series struct {
	Name   string
	Values []float64
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xff, 0x7f, 0x0e, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
}

// PlotLines writes a PNG line chart to path: one line per series over the x
// labels, a log-scale y axis labelled yLabel, and a legend on the right.
// Values that are not positive are left out of their line.
func PlotLines(path, title, yLabel string, xLabels []string, series []Series) error {
	const (
		w, h                     = 1100, 620
		left, right, top, bottom = 80, 330, 50, 60
		scale                    = 2
	)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fillRect(img, 0, 0, w, h, color.White)
	black := color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	drawText(img, left, 16, title, scale, black)

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	plotW, plotH := w-left-right, h-top-bottom
	yOf := func(v float64) int {
		return top + plotH - int(math.Round((math.Log10(v)-dLo)/(dHi-dLo)*float64(plotH)))
	}
	xOf := func(i int) int {
		if len(xLabels) < 2 {
			return left + plotW/2
		}
		return left + 20 + i*(plotW-40)/(len(xLabels)-1)
	}
	for d := dLo; d <= dHi; d++ {
		y := yOf(math.Pow(10, d))
		fillRect(img, left, y, plotW, 1, grid)
		label := strconv.FormatFloat(math.Pow(10, d), 'f', -1, 64)
		drawText(img, left-8-textWidth(label, scale), y-5, label, scale, black)
	}
	fillRect(img, left, top, 1, plotH+1, black)
	fillRect(img, left, top+plotH, plotW, 1, black)
	for i, l := range xLabels {
		x := xOf(i)
		fillRect(img, x, top+plotH, 1, 6, black)
		drawText(img, x-textWidth(l, scale)/2, top+plotH+12, l, scale, black)
	}
	drawText(img, left, h-22, yLabel, scale, black)

	for si, s := range series {
		c := palette[si%len(palette)]
		px, py, have := 0, 0, false
		for i, v := range s.Values {
			if i >= len(xLabels) || v <= 0 {
				have = false
				continue
			}
			x, y := xOf(i), yOf(v)
			if have {
				drawLine(img, px, py, x, y, 3, c)
			}
			fillRect(img, x-4, y-4, 9, 9, c)
			px, py, have = x, y, true
		}
		ly := top + 10 + si*26
		fillRect(img, w-right+20, ly, 24, 10, c)
		drawText(img, w-right+52, ly, s.Name, scale, black)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// drawLine draws a line of the given width with Bresenham's algorithm.
func drawLine(img *image.RGBA, x0, y0, x1, y1, width int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for i := 0; i < 1<<16; i++ {
		fillRect(img, x0-width/2, y0-width/2, width, width, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
