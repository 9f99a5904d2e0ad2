package rubricpool

import "math"

// relTol is the spread, relative to the sum of squares, below which a series
// counts as constant. The running sums cannot resolve less: SumXX −
// SumX²/N loses about N·ε of SumXX to rounding, so with ε ≈ 1e-16 and runs of
// up to ~10⁷ scored trajectories, a smaller spread is indistinguishable from
// noise and would yield an arbitrary correlation. Pearson uses the same rule
// so admission and the running statistic agree on what "no variance" means.
const relTol = 1e-9

// Corr accumulates the sufficient statistics of a Pearson correlation. The
// fields are exported and plain float64 so the store can persist a value and
// a restarted run can continue it bit for bit; N is a float64 for the same
// reason (one encoding for all six numbers).
type Corr struct {
	N                               float64
	SumX, SumY, SumXY, SumXX, SumYY float64
}

// Add records one (x, y) observation. A pair with a NaN or infinite member is
// ignored: one bad score would otherwise poison the persisted sums for the
// rest of the run.
func (c *Corr) Add(x, y float64) {
	if !isFinite(x) || !isFinite(y) {
		return
	}
	c.N++
	c.SumX += x
	c.SumY += y
	c.SumXY += x * y
	c.SumXX += x * x
	c.SumYY += y * y
}

// AddAll records the pairs (xs[i], ys[i]). Slices of different lengths are a
// caller bug (the pairing would be wrong), so AddAll panics on them.
func (c *Corr) AddAll(xs, ys []float64) {
	if len(xs) != len(ys) {
		panic("rubricpool: Corr.AddAll: slices of different lengths")
	}
	for i := range xs {
		c.Add(xs[i], ys[i])
	}
}

// Merge adds the observations accumulated in o, as if each had been Added.
func (c *Corr) Merge(o Corr) {
	c.N += o.N
	c.SumX += o.SumX
	c.SumY += o.SumY
	c.SumXY += o.SumXY
	c.SumXX += o.SumXX
	c.SumYY += o.SumYY
}

// Rho returns the Pearson correlation of the observations so far. It is
// undefined (false) with fewer than two observations or when either series
// is constant (see relTol).
func (c Corr) Rho() (float64, bool) {
	if !(c.N >= 2) {
		return 0, false
	}
	sxx := c.SumXX - c.SumX*c.SumX/c.N
	syy := c.SumYY - c.SumY*c.SumY/c.N
	sxy := c.SumXY - c.SumX*c.SumY/c.N
	return rhoFrom(sxx, syy, sxy, c.SumXX, c.SumYY)
}

// rhoFrom turns centred sums into a correlation, refusing degenerate series
// and clamping the rounding overshoot past ±1.
func rhoFrom(sxx, syy, sxy, sumSqX, sumSqY float64) (float64, bool) {
	if !(sxx > relTol*sumSqX) || !(syy > relTol*sumSqY) {
		return 0, false
	}
	// One square root of the product is exact for perfectly correlated
	// small data (r == 1, not 0.9999999999999998); the product of two huge
	// sums can overflow or underflow, and then two roots are taken instead.
	den := math.Sqrt(sxx * syy)
	if math.IsInf(den, 0) || den == 0 {
		den = math.Sqrt(sxx) * math.Sqrt(syy)
	}
	r := sxy / den
	if math.IsNaN(r) {
		return 0, false
	}
	return max(-1, min(1, r)), true
}

// Pearson is the two-pass Pearson correlation of xs and ys. It is undefined
// (false) when the lengths differ, fewer than two pairs are given, a value is
// NaN or infinite, or either series is constant.
func Pearson(xs, ys []float64) (float64, bool) {
	n := len(xs)
	if n != len(ys) || n < 2 {
		return 0, false
	}
	var sx, sy float64
	for i := range xs {
		if !isFinite(xs[i]) || !isFinite(ys[i]) {
			return 0, false
		}
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/float64(n), sy/float64(n)
	var sxx, syy, sxy, qx, qy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		syy += dy * dy
		sxy += dx * dy
		qx += xs[i] * xs[i]
		qy += ys[i] * ys[i]
	}
	return rhoFrom(sxx, syy, sxy, qx, qy)
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
