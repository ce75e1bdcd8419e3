// Command cltctl is the operator CLI of CodeLotse: migrations, tenants,
// users, tokens, repositories and rules. Every command reads DATABASE_URL
// (the administrative connection), prints a clear error and exits non-zero
// on bad input. One file per subcommand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/codelotse"
	"github.com/codelotse/codelotse/pkg/ingest"
	"github.com/codelotse/codelotse/pkg/postgres"
	"github.com/codelotse/codelotse/pkg/secretscan"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if errors.Is(err, errHelp) {
		return // -h: the flags were printed; asking for help is no failure
	}
	if err != nil {
		// A usage error is the caller's mistake: say exactly what was wrong
		// (it is not a codelotse.Error, so ErrorMessage would call it
		// internal) and exit 2, the CLI's status for bad arguments.
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "cltctl:", ue.msg)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "cltctl:", codelotse.ErrorMessage(err))
		if codelotse.ErrorCode(err) == codelotse.Invalid {
			// An argument or a document the domain refused (a slug, an
			// email, a repository name, an import with errors): a bad
			// argument too, which the README promises exit 2 for.
			os.Exit(2)
		}
		if codelotse.ErrorCode(err) == codelotse.Internal || codelotse.ErrorCode(err) == codelotse.Unavailable {
			// The cause is for the operator. A wrapped error prints whole,
			// so it names the storage operation that failed.
			if ce, ok := err.(*codelotse.Error); !ok {
				fmt.Fprintln(os.Stderr, "cltctl: cause:", err)
			} else if ce.Cause != nil {
				fmt.Fprintln(os.Stderr, "cltctl: cause:", ce.Cause)
			}
		}
		os.Exit(1)
	}
}

// env is what every command gets.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	now    time.Time
	cfg    config.Config
	// demoNotes collects what cltctl demo did besides the essentials.
	demoNotes strings.Builder
	// ingest prepares every agent-readable text the commands store; see
	// ingester.
	ingest *ingest.Ingester
}

// ingester returns the command's Ingester, built on first use. Building the
// redactor's rules costs about half a second of CPU, which the commands that
// store no text (migrate, token create, the lists) need not pay: an operator
// runs them by hand and the e2e suite runs them hundreds of times.
func (e *env) ingester() *ingest.Ingester {
	if e.ingest == nil {
		e.ingest = ingest.New(secretscan.New())
	}
	return e.ingest
}

type command struct {
	summary string
	run     func(e *env, args []string) error
}

// commands maps "group verb" (or a single word) to its command.
var commands = map[string]command{
	"migrate":            {"apply migrations, roles and policies", cmdMigrate},
	"tenant create":      {"create a tenant", cmdTenantCreate},
	"tenant set-mcp":     {"switch MCP on or off for a tenant", cmdTenantSetMCP},
	"tenant list":        {"list every tenant with MCP state and counts", cmdTenantList},
	"user list":          {"list a tenant's users with role, access source and age", cmdUserList},
	"repo list":          {"list a tenant's repositories with index status", cmdRepoList},
	"user add":           {"add a user (or refresh their membership)", cmdUserAdd},
	"user delete":        {"delete a user; their tokens stop working", cmdUserDelete},
	"token create":       {"create a personal access token; prints only the token", cmdTokenCreate},
	"token revoke":       {"revoke a token by id", cmdTokenRevoke},
	"token list":         {"list the tokens of a tenant", cmdTokenList},
	"repo add":           {"register a repository", cmdRepoAdd},
	"repo grant":         {"let a user view a repository", cmdRepoGrant},
	"rule add":           {"add or replace a review rule", cmdRuleAdd},
	"demo":               {"seed the demo tenant and print a fresh demo token (make run)", cmdDemo},
	"import review":      {"import a native review JSON document (docs/review-format.md)", cmdImportReview},
	"import sarif":       {"import SARIF 2.1.0 results as findings", cmdImportSARIF},
	"index":              {"index a local git checkout at a commit for search_code", cmdIndex},
	"redact":             {"re-redact every stored text (after an upgrade); --tenant for one tenant", cmdRedact},
	"idp add":            {"add (or update) the tenant's OIDC identity provider", cmdIdPAdd},
	"idp disable":        {"disable an identity provider; its tokens stop working", cmdIdPSetEnabled(false)},
	"idp enable":         {"enable an identity provider again", cmdIdPSetEnabled(true)},
	"idp map":            {"map an IdP group to a role (and repository)", cmdIdPMap},
	"idp unmap":          {"remove group mappings", cmdIdPUnmap},
	"github sync":        {"enqueue a GitHub sync of a tenant (or one repository); --wait waits for it", cmdGitHubSync},
	"health":             {"ask an API's /readyz; exit 0 when ready (the container health check)", cmdHealth},
	"break-glass":        {"print a single-use, 15-minute break-glass sign-in link", cmdBreakGlass},
	"membership refresh": {"refresh a user's cached membership now (24 hours)", cmdMembershipRefresh},
	"membership expire":  {"expire a user's cached membership (tokens answer 401)", cmdMembershipExpire},
}

// usageError marks errors in how cltctl was called (exit status 2).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usage() string { return groupUsage("") }

// groupUsage lists the commands of a group ("tenant"), or all for "".
func groupUsage(group string) string {
	var b strings.Builder
	if group == "" {
		b.WriteString("usage: cltctl COMMAND [flags]\n\ncommands:\n")
	} else {
		fmt.Fprintf(&b, "usage: cltctl %s COMMAND [flags]\n\ncommands:\n", group)
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		if group == "" || strings.HasPrefix(n, group+" ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-16s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun cltctl COMMAND -h for its flags. Every command reads DATABASE_URL.\n")
	return b.String()
}

// isGroup reports whether some command is "word …".
func isGroup(word string) bool {
	for n := range commands {
		if strings.HasPrefix(n, word+" ") {
			return true
		}
	}
	return false
}

// isHelp reports whether arg asks for help (as Go's flag package reads -h,
// -help and --help, plus the word).
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h" || arg == "help"
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stdout, usage())
		if len(args) == 0 {
			return usageError{"no command given"}
		}
		return nil
	}
	name, rest := args[0], args[1:]
	if _, ok := commands[name]; !ok && isGroup(name) {
		// "cltctl tenant -h" is help on the group's commands; "cltctl
		// tenant" alone names no command.
		switch {
		case len(args) == 1:
			fmt.Fprint(stderr, groupUsage(name))
			return usageError{fmt.Sprintf("%s: missing command", name)}
		case isHelp(args[1]):
			fmt.Fprint(stdout, groupUsage(name))
			return nil
		}
	}
	if _, ok := commands[name]; !ok && len(args) > 1 {
		name, rest = args[0]+" "+args[1], args[2:]
	}
	cmd, ok := commands[name]
	if !ok {
		if isGroup(args[0]) {
			fmt.Fprint(stderr, groupUsage(args[0]))
		} else {
			fmt.Fprint(stderr, usage())
		}
		return usageError{fmt.Sprintf("unknown command %q", strings.Join(args[:min(2, len(args))], " "))}
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return codelotse.Wrap(codelotse.Invalid, err, err.Error())
	}
	return cmd.run(&env{ctx: ctx, stdout: stdout, stderr: stderr, now: time.Now(), cfg: cfg}, rest)
}

// flags returns a flag set that reports errors instead of exiting.
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("cltctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// parse parses args (flags may come before or after positional arguments)
// and refuses a number of positional arguments other than want. The
// positional arguments are returned.
func parse(fs *flag.FlagSet, args []string, want int) error {
	_, err := parsePositional(fs, args, want)
	return err
}

func parsePositional(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != want {
		return nil, usageError{fmt.Sprintf("%s: expected %d positional arguments, got %d", fs.Name(), want, len(pos))}
	}
	// Every value goes to PostgreSQL as text, which refuses invalid UTF-8
	// and NUL: checked once here, so that a bad byte is the caller's
	// usage error (exit 2), not an internal error from the database.
	var bad error
	fs.Visit(func(f *flag.Flag) {
		if v := f.Value.String(); bad == nil && !pathFlags[f.Name] && !plainArg(v) {
			bad = usageError{fmt.Sprintf("--%s: the value is not valid UTF-8 text (or holds a NUL byte)", f.Name)}
		}
	})
	// (Positional arguments are file and directory names, which need not
	// be UTF-8 and are not stored.)
	return pos, bad
}

// displayName refuses a name shown on one line (a tenant's, a person's, a
// rule's title) with control characters, or over 200 characters: a
// newline in a tenant's name broke the tenant list across lines.
func displayName(flagName, v string) error {
	if strings.ContainsFunc(v, lineBreaking) {
		return usageError{fmt.Sprintf("--%s must be one line without control characters", flagName)}
	}
	if utf8.RuneCountInString(v) > 200 {
		return usageError{fmt.Sprintf("--%s is longer than 200 characters", flagName)}
	}
	return nil
}

// lineBreaking reports a control character (C0, DEL, C1 such as NEL) or a
// Unicode line or paragraph separator: none belongs in a one-line name.
func lineBreaking(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

// errHelp is what a command returns for -h or --help, after the flag
// package printed its flags.
var errHelp = errors.New("help requested")

// pathFlags name a file or directory on this machine, which need not be
// UTF-8 and is not stored.
var pathFlags = map[string]bool{"source": true}

// plainArg reports whether v is valid UTF-8 without NUL.
func plainArg(v string) bool { return utf8.ValidString(v) && !strings.ContainsRune(v, 0) }

// need refuses missing required flags by name.
func need(pairs ...string) error {
	var missing []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			missing = append(missing, "--"+pairs[i])
		}
	}
	if len(missing) > 0 {
		return usageError{"missing required flag " + strings.Join(missing, ", ")}
	}
	return nil
}

// admin opens the administrative connection.
func (e *env) admin() (*postgres.DB, error) {
	return postgres.OpenURL(e.ctx, e.cfg.DatabaseURL)
}

// tenant resolves a slug.
func (e *env) tenant(db *postgres.DB, slug string) (string, error) {
	id, err := db.TenantIDBySlug(e.ctx, slug)
	if err != nil && codelotse.ErrorCode(err) == codelotse.Internal {
		return "", codelotse.Wrap(codelotse.Unavailable, err, "cannot look up the tenant (has `cltctl migrate` run?)")
	}
	return id, err
}

var operator = postgres.Actor{Label: "cltctl"}

// inTenant opens the administrative connection and runs fn in a tenant
// transaction of the tenant with slug.
func (e *env) inTenant(slug string, fn func(tx *postgres.Tx) error) error {
	db, err := e.admin()
	if err != nil {
		return err
	}
	defer db.Close()
	tid, err := e.tenant(db, slug)
	if err != nil {
		return err
	}
	return db.InTenant(e.ctx, tid, fn)
}
