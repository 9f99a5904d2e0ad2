package rubricpool

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultConfig(t *testing.T) {
	want := Config{
		VarMin: 0.01, RhoMin: 0.2, ConsolidateAt: 8, RetireStreak: 5,
		MinActivations: 3, Active: 2, Lambda: 0.1, DedupJaccard: 0.8,
	}
	if got := DefaultConfig(); got != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"VarMin zero", func(c *Config) { c.VarMin = 0 }, ""},
		{"VarMin negative", func(c *Config) { c.VarMin = -0.01 }, "VarMin"},
		{"VarMin NaN", func(c *Config) { c.VarMin = nan }, "VarMin"},
		{"VarMin Inf", func(c *Config) { c.VarMin = inf }, "VarMin"},
		{"RhoMin -1", func(c *Config) { c.RhoMin = -1 }, ""},
		{"RhoMin 1", func(c *Config) { c.RhoMin = 1 }, ""},
		{"RhoMin above 1", func(c *Config) { c.RhoMin = 1.01 }, "RhoMin"},
		{"RhoMin below -1", func(c *Config) { c.RhoMin = -1.5 }, "RhoMin"},
		{"RhoMin NaN", func(c *Config) { c.RhoMin = nan }, "RhoMin"},
		{"ConsolidateAt 1", func(c *Config) { c.ConsolidateAt = 1 }, ""},
		{"ConsolidateAt 0", func(c *Config) { c.ConsolidateAt = 0 }, "ConsolidateAt"},
		{"RetireStreak 0", func(c *Config) { c.RetireStreak = 0 }, ""},
		{"RetireStreak negative", func(c *Config) { c.RetireStreak = -1 }, "RetireStreak"},
		{"MinActivations 0", func(c *Config) { c.MinActivations = 0 }, ""},
		{"MinActivations negative", func(c *Config) { c.MinActivations = -2 }, "MinActivations"},
		{"Active 0", func(c *Config) { c.Active = 0 }, "Active"},
		{"Lambda 0", func(c *Config) { c.Lambda = 0 }, ""},
		{"Lambda negative", func(c *Config) { c.Lambda = -0.1 }, "Lambda"},
		{"Lambda Inf", func(c *Config) { c.Lambda = math.Inf(-1) }, "Lambda"},
		{"DedupJaccard 1", func(c *Config) { c.DedupJaccard = 1 }, ""},
		{"DedupJaccard 0", func(c *Config) { c.DedupJaccard = 0 }, "DedupJaccard"},
		{"DedupJaccard above 1", func(c *Config) { c.DedupJaccard = 1.2 }, "DedupJaccard"},
		{"DedupJaccard NaN", func(c *Config) { c.DedupJaccard = nan }, "DedupJaccard"},
		{"Seed negative", func(c *Config) { c.Seed = -42 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), ": "+tt.field+" = ") {
				t.Fatalf("Validate() = %q, does not name %s", err, tt.field)
			}
		})
	}
}

func TestConfigValidateReportsEveryField(t *testing.T) {
	err := Config{VarMin: -1, RhoMin: 2, DedupJaccard: 0.5}.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate() = %v", err)
	}
	want := "rubricpool: invalid config: VarMin = -1, want a finite value >= 0\n" +
		"rubricpool: invalid config: RhoMin = 2, want a value in [-1, 1]\n" +
		"rubricpool: invalid config: ConsolidateAt = 0, want >= 1\n" +
		"rubricpool: invalid config: Active = 0, want >= 1"
	if err.Error() != want {
		t.Fatalf("Validate() =\n%s\nwant\n%s", err, want)
	}
}
