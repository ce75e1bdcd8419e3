package importer

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/codelotse/codelotse/pkg/codelotse"
)

// SARIFOptions says where SARIF results belong: a repository, and optionally
// a pull request and the commit that was analysed.
type SARIFOptions struct {
	Repository string
	PRNumber   int
	Commit     string
}

// The subset of SARIF 2.1.0 that becomes findings. Unknown fields are
// ignored: SARIF producers add many.
type sarifLog struct {
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool struct {
		Driver sarifComponent `json:"driver"`
		// Extensions hold rules too: CodeQL puts its queries' rules in
		// the query packs' extensions.
		Extensions []sarifComponent `json:"extensions"`
	} `json:"tool"`
	OriginalURIBaseIDs map[string]sarifArtifact `json:"originalUriBaseIds"`
	Results            []sarifResult            `json:"results"`
}

type sarifComponent struct {
	Name    string      `json:"name"`
	Version string      `json:"version"`
	Rules   []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	Name             string       `json:"name"`
	ShortDescription *sarifText   `json:"shortDescription"`
	FullDescription  *sarifText   `json:"fullDescription"`
	Help             *sarifText   `json:"help"`
	Default          *sarifConfig `json:"defaultConfiguration"`
	Properties       sarifProps   `json:"properties"`
}

type sarifText struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifProps map[string]any

// sarifArtifact is an artifactLocation (or a base URI of
// originalUriBaseIds).
type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifResult struct {
	RuleID    string `json:"ruleId"`
	RuleIndex *int   `json:"ruleIndex"`
	Rule      *struct {
		ID            string `json:"id"`
		Index         *int   `json:"index"`
		ToolComponent *struct {
			Index *int `json:"index"`
		} `json:"toolComponent"`
	} `json:"rule"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Fingerprints        map[string]string `json:"fingerprints"`
	Suppressions        []struct {
		Kind   string `json:"kind"`
		Status string `json:"status"`
	} `json:"suppressions"`
	BaselineState string     `json:"baselineState"`
	Properties    sarifProps `json:"properties"`
	Fixes         []struct {
		Description sarifText `json:"description"`
	} `json:"fixes"`
}

type sarifLocation struct {
	PhysicalLocation *struct {
		ArtifactLocation sarifArtifact `json:"artifactLocation"`
		Region           *struct {
			StartLine *int `json:"startLine"`
			EndLine   *int `json:"endLine"`
		} `json:"region"`
	} `json:"physicalLocation"`
}

// ruleRef is a rule of a run and its JSON pointer.
type ruleRef struct {
	rule sarifRule
	ptr  string
}

// runRules finds the rule a result refers to.
type runRules struct {
	// byComponent[0] are the driver's rules, byComponent[i+1] those of
	// extension i.
	byComponent [][]ruleRef
	byID        map[string]ruleRef
}

func newRunRules(rptr string, run sarifRun) runRules {
	rr := runRules{byID: map[string]ruleRef{}}
	add := func(cptr string, rules []sarifRule) {
		refs := make([]ruleRef, len(rules))
		for i, r := range rules {
			refs[i] = ruleRef{rule: r, ptr: fmt.Sprintf("%s/rules/%d", cptr, i)}
			if _, dup := rr.byID[r.ID]; !dup && r.ID != "" {
				rr.byID[r.ID] = refs[i]
			}
		}
		rr.byComponent = append(rr.byComponent, refs)
	}
	add(rptr+"/tool/driver", run.Tool.Driver.Rules)
	for i, ext := range run.Tool.Extensions {
		add(fmt.Sprintf("%s/tool/extensions/%d", rptr, i), ext.Rules)
	}
	return rr
}

// lookup returns the id of the rule of res and the rule itself (zero if the
// run does not describe it): by index (ruleIndex or rule.index, among the
// driver's rules or those of the extension rule.toolComponent.index names),
// else by id.
func (rr runRules) lookup(res sarifResult) (string, ruleRef) {
	id := res.RuleID
	idx := res.RuleIndex
	comp := 0
	if res.Rule != nil {
		if id == "" {
			id = res.Rule.ID
		}
		if idx == nil {
			idx = res.Rule.Index
		}
		if tc := res.Rule.ToolComponent; tc != nil && tc.Index != nil {
			comp = -1 // no such component unless the index is valid
			if *tc.Index >= 0 && *tc.Index < len(rr.byComponent)-1 {
				comp = *tc.Index + 1
			}
		}
	}
	if idx != nil && comp >= 0 && *idx >= 0 && *idx < len(rr.byComponent[comp]) {
		ref := rr.byComponent[comp][*idx]
		if id == "" {
			id = ref.rule.ID
		}
		return id, ref
	}
	if id == "" {
		return "", ruleRef{}
	}
	return id, rr.byID[id]
}

// ParseSARIF reads a SARIF 2.1.0 log: every result of every run becomes a
// finding of one review (external id derived from the tools, pull request
// and commit, so re-importing the same analysis is idempotent).
func ParseSARIF(data []byte, opts SARIFOptions) (codelotse.ReviewImport, error) {
	var out codelotse.ReviewImport
	if !fullNameRE.MatchString(opts.Repository) {
		return out, codelotse.Errorf(codelotse.Invalid, "repository must be OWNER/NAME, not %q", opts.Repository)
	}
	if opts.Commit != "" && !shaRE.MatchString(opts.Commit) {
		return out, codelotse.Errorf(codelotse.Invalid, "commit must be a lowercase hex commit id")
	}
	if opts.PRNumber < 0 {
		return out, codelotse.Errorf(codelotse.Invalid, "pull request number must be positive")
	}
	if opts.PRNumber > maxNumber {
		return out, codelotse.Errorf(codelotse.Invalid, "pull request number must be at most %d", maxNumber)
	}
	var log sarifLog
	if err := decodeStrict(data, &log, false); err != nil {
		return out, err
	}
	if log.Version != "2.1.0" {
		return out, invalidf("/version", "must be \"2.1.0\" (only SARIF 2.1.0 is supported), not %q", log.Version)
	}
	if len(log.Runs) == 0 {
		return out, invalidf("/runs", "has no runs")
	}
	out.Repository = opts.Repository
	if opts.PRNumber > 0 {
		// The state is unknown to an analyser: a new pull request starts open, a known one keeps its state.
		out.PullRequest = &codelotse.PullRequest{Number: opts.PRNumber, HeadSHA: opts.Commit}
	}
	var tools []string
	seenTool := map[string]bool{}
	seen := map[string]bool{}
	total := 0
	for ri, run := range log.Runs {
		rptr := fmt.Sprintf("/runs/%d", ri)
		tool := strings.TrimSpace(run.Tool.Driver.Name)
		if tool == "" {
			return out, invalidf(rptr+"/tool/driver/name", "is required")
		}
		// One tool in several runs (CodeQL, one run per language) is
		// named once.
		if !seenTool[tool] {
			seenTool[tool] = true
			tools = append(tools, tool)
		}
		rules := newRunRules(rptr, run)
		bases := baseURIs(run.OriginalURIBaseIDs)
		for i, res := range run.Results {
			ptr := fmt.Sprintf("%s/results/%d", rptr, i)
			total++
			if total > MaxFindings {
				return out, invalidf(ptr, "too many results; at most %d per import", MaxFindings)
			}
			f, err := sarifFinding(ptr, tool, res, rules, bases)
			if err != nil {
				return out, err
			}
			// Identical results (same fingerprint) are one finding.
			if seen[f.Fingerprint] {
				continue
			}
			seen[f.Fingerprint] = true
			f.CommitSHA = opts.Commit
			out.Findings = append(out.Findings, f)
		}
	}
	sort.Strings(tools)
	out.Source = "sarif:" + strings.Join(tools, "+")
	ext := "sarif:" + strings.Join(tools, "+")
	if opts.PRNumber > 0 {
		ext += ":pr" + strconv.Itoa(opts.PRNumber)
	}
	if opts.Commit != "" {
		ext += ":" + opts.Commit
	}
	noun := "findings"
	if len(out.Findings) == 1 {
		noun = "finding"
	}
	out.Review = codelotse.Review{ExternalID: ext, CommitSHA: opts.Commit, Status: "completed", Author: strings.Join(tools, ", "),
		Summary: fmt.Sprintf("%s reported %d %s.", strings.Join(tools, ", "), len(out.Findings), noun)}
	return out, nil
}

func sarifFinding(ptr, tool string, res sarifResult, rules runRules, bases map[string]string) (codelotse.Finding, error) {
	var f codelotse.Finding
	ruleID, ref := rules.lookup(res)
	rule := ref.rule
	msg := res.Message.Text
	if msg == "" {
		msg = res.Message.Markdown
	}
	if strings.TrimSpace(msg) == "" {
		return f, invalidf(ptr+"/message/text", "is required")
	}
	title := ""
	switch {
	case rule.ShortDescription != nil && rule.ShortDescription.Text != "":
		title = rule.ShortDescription.Text
	case rule.Name != "":
		title = rule.Name
	case ruleID != "":
		title = ruleID
	default:
		title = firstLine(msg)
	}
	var path string
	var start, end *int
	if len(res.Locations) > 0 && res.Locations[0].PhysicalLocation != nil {
		pl := res.Locations[0].PhysicalLocation
		lptr := ptr + "/locations/0/physicalLocation"
		p, err := sarifPath(lptr+"/artifactLocation/uri", pl.ArtifactLocation, bases)
		if err != nil {
			return f, err
		}
		path = p
		if pl.Region != nil && pl.Region.StartLine != nil {
			// A range needs its start: an endLine alone is dropped.
			start, end = pl.Region.StartLine, pl.Region.EndLine
			if end == nil {
				end = start
			}
			if *start < 1 || *start > maxNumber {
				return f, invalidf(lptr+"/region/startLine", "must be 1 to %d", maxNumber)
			}
			if *end > maxNumber {
				return f, invalidf(lptr+"/region/endLine", "must be at most %d", maxNumber)
			}
			if *end < *start {
				return f, invalidf(lptr+"/region/endLine", "must not be before startLine")
			}
		}
	}
	level, levelPtr := res.Level, ptr+"/level"
	if level == "" && rule.Default != nil && rule.Default.Level != "" {
		level, levelPtr = rule.Default.Level, ref.ptr+"/defaultConfiguration/level"
	}
	sev, err := sarifSeverity(level, levelPtr,
		propsAt{res.Properties, ptr + "/properties"}, propsAt{rule.Properties, ref.ptr + "/properties"})
	if err != nil {
		return f, err
	}
	status := codelotse.StatusOpen
	switch {
	case suppressed(res):
		status = codelotse.StatusDismissed
	case res.BaselineState == "absent":
		status = codelotse.StatusResolved
	}
	suggestion := ""
	if len(res.Fixes) > 0 {
		suggestion = res.Fixes[0].Description.Text
	}
	key := ruleID
	if key == "" {
		key = tool
	} else {
		key = tool + "/" + ruleID
	}
	fp := ""
	for _, m := range []map[string]string{res.PartialFingerprints, res.Fingerprints} {
		if len(m) == 0 {
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k + "=" + m[k] + ";")
		}
		fp = Fingerprint(key, path, start, end, b.String())
		break
	}
	if fp == "" {
		fp = Fingerprint(key, path, start, end, msg)
	}
	return codelotse.Finding{RuleKey: key, Severity: sev, Status: status, Path: path, StartLine: start, EndLine: end,
		Title: title, Body: msg, Suggestion: suggestion, Fingerprint: fp, Source: "sarif:" + tool}, nil
}

// suppressed reports whether res is suppressed (SARIF §3.27.23): it has
// suppressions and none of them is under review or rejected.
func suppressed(res sarifResult) bool {
	if len(res.Suppressions) == 0 {
		return false
	}
	for _, s := range res.Suppressions {
		if s.Status == "underReview" || s.Status == "rejected" {
			return false
		}
	}
	return true
}

// propsAt is a property bag and its JSON pointer.
type propsAt struct {
	props sarifProps
	ptr   string
}

// sarifSeverity maps a CVSS-like security-severity (CodeQL, Semgrep) when
// present, else the SARIF level: error → high, warning → medium,
// note → low, none → info. The level must be valid either way.
func sarifSeverity(level, levelPtr string, props ...propsAt) (codelotse.Severity, error) {
	var byLevel codelotse.Severity
	switch level {
	case "error":
		byLevel = codelotse.SeverityHigh
	case "warning", "":
		byLevel = codelotse.SeverityMedium
	case "note":
		byLevel = codelotse.SeverityLow
	case "none":
		byLevel = codelotse.SeverityInfo
	default:
		return "", invalidf(levelPtr, "must be none, note, warning or error, not %q", level)
	}
	for _, p := range props {
		v, ok := p.props["security-severity"]
		if !ok {
			continue
		}
		sptr := p.ptr + "/security-severity"
		var score float64
		switch x := v.(type) {
		case string:
			s, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil || math.IsNaN(s) || math.IsInf(s, 0) {
				return "", invalidf(sptr, "must be a number, not %q", x)
			}
			score = s
		case float64:
			score = x
		default:
			return "", invalidf(sptr, "must be a number")
		}
		switch {
		case score >= 9:
			return codelotse.SeverityCritical, nil
		case score >= 7:
			return codelotse.SeverityHigh, nil
		case score >= 4:
			return codelotse.SeverityMedium, nil
		case score > 0:
			return codelotse.SeverityLow, nil
		}
		return codelotse.SeverityInfo, nil
	}
	return byLevel, nil
}

// baseURIs returns the paths of a run's absolute file: base URIs
// (originalUriBaseIds), each ending in "/".
func baseURIs(m map[string]sarifArtifact) map[string]string {
	out := map[string]string{}
	for id, a := range m {
		if u, err := url.Parse(a.URI); err == nil && u.Scheme == "file" && u.Path != "" {
			out[id] = strings.TrimSuffix(u.Path, "/") + "/"
		}
	}
	return out
}

// sarifPath turns an artifact location into a repository-relative path. An
// absolute file: URI inside one of the run's base URIs (CodeQL's %SRCROOT%,
// for instance) is made relative to the longest such base; relative URIs are
// taken as relative to the repository root; either is percent-decoded.
func sarifPath(ptr string, loc sarifArtifact, bases map[string]string) (string, error) {
	uri := loc.URI
	if uri == "" {
		return "", nil
	}
	if u, err := url.Parse(uri); err == nil && u.Scheme == "file" {
		uri = u.Path
		best := ""
		for _, b := range bases {
			if strings.HasPrefix(uri, b) && len(b) > len(best) {
				best = b
			}
		}
		uri = strings.TrimPrefix(uri, best)
	} else if err == nil && u.Scheme == "" {
		if p, err := url.PathUnescape(uri); err == nil {
			uri = p
		}
	}
	return cleanPath(ptr, uri)
}

// firstLine is the first line of s, at most 200 characters.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200])
	}
	return s
}
