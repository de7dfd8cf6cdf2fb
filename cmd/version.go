package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/racetest/racetest/cmd.Version=v1.2.3";
// otherwise it is read from the module's build information.
var Version = ""

// buildInfo is read once: the binary does not change while it runs.
var buildInfo, haveBuildInfo = debug.ReadBuildInfo()

// version is racetest's version in one word, as a report records it: the
// -ldflags version, else the module's (v1.2.3 from 'go install …@v1.2.3',
// a pseudo-version from a build in a clone), else "devel-" and the commit,
// and "dev" only when the build recorded nothing at all.
func version() string {
	var bi *debug.BuildInfo
	if haveBuildInfo {
		bi = buildInfo
	}
	return versionOf(Version, bi)
}

func versionOf(ldflags string, bi *debug.BuildInfo) string {
	if ldflags != "" {
		return ldflags
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	vcs := vcsOf(bi)
	if vcs.revision == "" {
		return "dev"
	}
	v := "devel-" + short(vcs.revision)
	if vcs.modified {
		v += "-dirty"
	}
	return v
}

// versionLine is what 'racetest version' and 'racetest --version' print:
// the version, then the commit, its time and whether the tree had
// uncommitted changes, and the Go that built it.
func versionLine(ldflags string, bi *debug.BuildInfo) string {
	line := "racetest " + versionOf(ldflags, bi)
	var parts []string
	goVersion := runtime.Version()
	if bi != nil {
		vcs := vcsOf(bi)
		if vcs.revision != "" {
			parts = append(parts, "commit "+short(vcs.revision))
		}
		if vcs.time != "" {
			parts = append(parts, vcs.time)
		}
		if vcs.modified {
			parts = append(parts, "modified")
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	parts = append(parts, goVersion+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return line + " (" + strings.Join(parts, ", ") + ")"
}

type vcsInfo struct {
	revision, time string
	modified       bool
}

func vcsOf(bi *debug.BuildInfo) vcsInfo {
	var v vcsInfo
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.time":
			v.time = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// currentVersionLine is versionLine for this binary.
func currentVersionLine() string {
	var bi *debug.BuildInfo
	if haveBuildInfo {
		bi = buildInfo
	}
	return versionLine(Version, bi)
}

// newCmdVersion prints racetest's version: the same line as --version.
func newCmdVersion(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print racetest's version, commit and build",
		Long: `version prints the version racetest was built as (the module version 'go install'
recorded, or the commit of a build in a clone), the commit and its time, "modified" when
the tree had uncommitted changes, and the Go that built it. 'racetest --version' prints
the same line.`,
		Example: `  racetest version
  racetest --version`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(f.IO.Out, currentVersionLine())
			return nil
		},
	}
}
