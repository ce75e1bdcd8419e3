package secretscan

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/logging"

	"github.com/codelotse/codelotse/policies"
)

// loadConfig builds the gitleaks configuration from policies.GitleaksTOML
// the way gitleaks itself does: viper reads the TOML into a ViperConfig and
// Translate compiles it, extending it with gitleaks' default rules
// ([extend] useDefault = true).
//
// gitleaks' Translate keeps global state (the extend depth and viper's
// global instance), so this must run at most once per process.
func loadConfig() (config.Config, error) {
	silenceGitleaks()
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(policies.GitleaksTOML)); err != nil {
		return config.Config{}, fmt.Errorf("secretscan: read gitleaks config: %w", err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return config.Config{}, fmt.Errorf("secretscan: decode gitleaks config: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return config.Config{}, fmt.Errorf("secretscan: compile gitleaks config: %w", err)
	}
	return cfg, nil
}

// silenceGitleaks disables gitleaks' logger: at debug and trace level it
// logs findings, secrets included.
func silenceGitleaks() {
	logging.Logger = zerolog.Nop()
}
