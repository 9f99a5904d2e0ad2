package rubricpool

import (
	"fmt"
	"strconv"
)

// RetireReason decides whether a public rubric retires, and says why in a
// form stored with the lifecycle event. Two reasons, checked in this order:
//
//   - mastered: the rubric's scores have had variance below VarMin for more
//     than RetireStreak consecutive activations (lowVarStreak > RetireStreak);
//     the policy satisfies it everywhere and it no longer separates groups.
//   - uncorrelated: after at least MinActivations activations its running
//     correlation with the outcome is defined and below RhoMin; it rewards
//     something that does not track success. An undefined correlation never
//     retires a rubric here; constant scores are the streak's business.
func RetireReason(u RubricUsage, lowVarStreak int, cfg Config) (reason string, retire bool) {
	if lowVarStreak > cfg.RetireStreak {
		return fmt.Sprintf("mastered: low-variance streak %d > %d", lowVarStreak, cfg.RetireStreak), true
	}
	if u.Activations >= cfg.MinActivations {
		if rho, ok := u.Corr.Rho(); ok && rho < cfg.RhoMin {
			return fmt.Sprintf("uncorrelated: rho %s < %s", rhoText(rho, cfg.RhoMin), fmtFloat(cfg.RhoMin, -1)), true
		}
	}
	return "", false
}

// rhoText formats rho to 4 significant digits for a readable log line, unless
// rounding would make it look no smaller than floor (0.19996 as "0.2"); then it
// uses the shortest exact form so the reason never contradicts itself.
func rhoText(rho, floor float64) string {
	s := fmtFloat(rho, 4)
	if r, err := strconv.ParseFloat(s, 64); err == nil && r < floor {
		return s
	}
	return fmtFloat(rho, -1)
}

func fmtFloat(x float64, prec int) string { return strconv.FormatFloat(x, 'g', prec, 64) }
