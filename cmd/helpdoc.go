package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitMeaning is what each exit code means, the same for every command
// (README, "Exit codes"); exitCodesOf says which a command can return.
var exitMeaning = map[int]string{
	exitOK:           "every expectation met",
	exitViolated:     "an expectation was violated (a RACE or LOST where SAFE was expected, no RACE under --expect race)",
	exitUsage:        "bad flags, arguments or input: nothing ran",
	exitSetup:        "a backend could not be reached or set up",
	exitInconclusive: "a run proved nothing (INCONCLUSIVE) and --expect safe (unless --allow-inconclusive), --strict, or a suite fails that",
	exitInterrupted:  "interrupted (Ctrl-C, SIGTERM): what finished is still reported",
}

// exitCodes are the codes each command can return, by its name under the
// root; a command not listed (racetest itself) returns any of them.
var exitCodes = map[string][]int{
	"list":       {exitOK, exitUsage},
	"explain":    {exitOK, exitUsage},
	"version":    {exitOK, exitUsage},
	"completion": {exitOK, exitUsage},
	"run":        {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"demo":       {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"suite":      {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"http":       {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"sql":        {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"redis":      {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"mongo":      {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"explore":    {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"replay":     {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive, exitInterrupted},
	"report":     {exitOK, exitViolated, exitUsage, exitSetup, exitInconclusive},
	"bench":      {exitOK, exitUsage, exitSetup, exitInterrupted},
	"serve":      {exitOK, exitUsage, exitSetup},
	"proxy":      {exitOK, exitUsage, exitSetup},
	"clean":      {exitOK, exitUsage, exitSetup, exitInterrupted},
}

// exitNotes say what a code means for one command where the general
// meaning would mislead.
var exitNotes = map[string]map[int]string{
	"demo": {
		exitOK:           "every scenario behaved as the catalog says",
		exitViolated:     "a scenario did not behave as the catalog says",
		exitInconclusive: "with --strict, a SAFE scenario's bursts proved nothing",
	},
	"suite": {
		exitInconclusive: "a case proved nothing (INCONCLUSIVE), unless it says allow_inconclusive: true or --allow-inconclusive is given",
	},
	"report": {
		exitUsage:        "the file or the flags are wrong",
		exitViolated:     "a run in the report did not meet its expectation",
		exitSetup:        "a run in the report could not be carried out",
		exitInconclusive: "a run in the report was inconclusive under --expect safe or --strict",
	},
	"bench":      {exitOK: "the figures were measured", exitSetup: "no server answered"},
	"serve":      {exitOK: "stopped cleanly (SIGTERM, Ctrl-C, or stdin closed under run --processes)", exitSetup: "cannot listen, or the backend cannot be set up"},
	"proxy":      {exitOK: "stopped cleanly (Ctrl-C, SIGTERM), releasing whatever it held", exitUsage: "an upstream the proxy does not speak, or a bad address", exitSetup: "the upstream server does not answer, or an address cannot be listened on"},
	"clean":      {exitSetup: "a server could not be reached, or an object could not be dropped"},
	"list":       {exitOK: "listed"},
	"explain":    {exitOK: "told the story"},
	"version":    {exitOK: "printed the version"},
	"completion": {exitOK: "printed the completion script"},
}

// exitCodesHelp is the "Exit codes" section of c's help.
func exitCodesHelp(c *cobra.Command) string {
	name := ""
	if c.HasParent() {
		name = strings.Fields(strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "))[0]
	}
	codes, ok := exitCodes[name]
	if !ok {
		codes = exitCodes["run"]
	}
	var b strings.Builder
	for _, code := range codes {
		why := exitMeaning[code]
		if n, ok := exitNotes[name][code]; ok {
			why = n
		}
		fmt.Fprintf(&b, "  %-4d %s\n", code, why)
	}
	return strings.TrimRight(b.String(), "\n")
}

// rootExamples are racetest's own examples: one per everyday task.
const rootExamples = `  racetest demo
  racetest explain check-then-write
  racetest run check-then-write --expect race
  racetest suite --junit racetest.xml ci/racetest.yaml
  racetest http POST 'http://127.0.0.1:8080/redeem?code={{.Token}}' -n 20`

// usageTemplate is cobra's, with each command's exit codes after its flags.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}

Exit codes:
{{racetestExitCodes .}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func init() {
	cobra.AddTemplateFunc("racetestExitCodes", exitCodesHelp)
}
