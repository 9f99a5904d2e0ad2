package rubricpool

import "testing"

func TestRetireReason(t *testing.T) {
	cfg := DefaultConfig() // RetireStreak 5, MinActivations 3, RhoMin 0.2
	// rhoMid is 1/√5 ≈ 0.4472, above RhoMin; rhoLow is −1.
	justBelow := corrOf([]float64{0, 1, 2, 3, 4}, []float64{1, 0, 0, 1, 0.3}) // −0.4/√10.32 ≈ −0.12451
	tests := []struct {
		name   string
		u      RubricUsage
		streak int
		cfg    Config
		reason string
		retire bool
	}{
		{"healthy", RubricUsage{Corr: rhoMid, Activations: 10}, 0, cfg, "", false},
		{"streak at the limit stays", RubricUsage{Corr: rhoMid, Activations: 10}, 5, cfg, "", false},
		{"streak past the limit", RubricUsage{Corr: rhoMid, Activations: 10}, 6, cfg,
			"mastered: low-variance streak 6 > 5", true},
		{"mastered wins over uncorrelated", RubricUsage{Corr: rhoLow, Activations: 10}, 9, cfg,
			"mastered: low-variance streak 9 > 5", true},
		{"uncorrelated", RubricUsage{Corr: rhoLow, Activations: 3}, 0, cfg,
			"uncorrelated: rho -1 < 0.2", true},
		{"uncorrelated, rounded to 4 digits", RubricUsage{Corr: justBelow, Activations: 4}, 2, cfg,
			"uncorrelated: rho -0.1245 < 0.2", true},
		{"too few activations to judge", RubricUsage{Corr: rhoLow, Activations: 2}, 0, cfg, "", false},
		{"undefined correlation never retires", RubricUsage{Corr: rhoUndef, Activations: 50}, 0, cfg, "", false},
		{"no observations", RubricUsage{Activations: 50}, 0, cfg, "", false},
		// rhoHigh is exactly 1; the comparison is strict.
		{"correlation at RhoMin stays",
			RubricUsage{Corr: rhoHigh, Activations: 3}, 0,
			Config{RetireStreak: 5, MinActivations: 3, RhoMin: 1}, "", false},
		{"MinActivations 0 judges immediately", RubricUsage{Corr: rhoLow}, 0,
			Config{RetireStreak: 5, RhoMin: 0.2}, "uncorrelated: rho -1 < 0.2", true},
		{"RetireStreak 0 retires on the first low-variance activation", RubricUsage{Corr: rhoMid, Activations: 1}, 1,
			Config{MinActivations: 3, RhoMin: 0.2}, "mastered: low-variance streak 1 > 0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, retire := RetireReason(tt.u, tt.streak, tt.cfg)
			if reason != tt.reason || retire != tt.retire {
				t.Errorf("RetireReason = %q, %v; want %q, %v", reason, retire, tt.reason, tt.retire)
			}
		})
	}
}

// A correlation that would print as the threshold is shown exactly instead.
func TestRhoTextNeverContradicts(t *testing.T) {
	rho := 0.19999
	if got := rhoText(rho, 0.2); got != "0.19999" {
		t.Errorf("rhoText = %q", got)
	}
	if got := rhoText(0.123456, 0.2); got != "0.1235" {
		t.Errorf("rhoText = %q", got)
	}
}
