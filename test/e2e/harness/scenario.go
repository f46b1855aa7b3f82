package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// The files of a composite's folder in the Configuration package,
// package/configuration/<composite>/: the XRD and the Composition, the same
// files the package ships.
const (
	FileXRD         = "xrd.yaml"
	FileComposition = "composition.yaml"
)

// The files of an example composite folder, example/<composite>/, and of
// its scenario folders, example/<composite>/<scenario>/.
const (
	FileFunctions = "functions.yaml"
	FileXR        = "xr.yaml"
	FileObserved  = "observed.yaml"
	FileRequired  = "required.yaml"
	// FileExpected says what the XR reports after the scenario's render:
	// its Ready status and the function's own condition.
	FileExpected = "expected.yaml"
)

// DefaultScenario names the one scenario of a composite folder that has no
// scenario folders: it renders the composite's own xr.yaml.
const DefaultScenario = "default"

// ConfigurationDir is the Configuration package's folder for the examples
// in exampleDir: package/configuration beside example/ at the repository
// root. It holds each composite's XRD and Composition.
func ConfigurationDir(exampleDir string) string {
	return filepath.Join(filepath.Dir(exampleDir), "package", "configuration")
}

// Composite is an example composite folder, the Functions it runs and
// usually an XR, with the XRD and Composition of the composite's folder in
// the Configuration package.
type Composite struct {
	// Name is the folder's name, e.g. gateway.
	Name string
	// Dir is the folder's absolute path.
	Dir string
	// XRD, Composition and Functions are absolute paths.
	XRD, Composition, Functions string
	// XR is the absolute path of the folder's xr.yaml, or empty.
	XR string
}

// Scenario is one render: a composite's files plus the XR, and optionally
// the observed and required resources, of one scenario folder.
type Scenario struct {
	// Composite is the composite folder's name, e.g. gateway.
	Composite string
	// Name is the scenario folder's name, or DefaultScenario.
	Name string
	// XRD, Composition and Functions are the composite's files, as
	// absolute paths.
	XRD, Composition, Functions string
	// XR is the absolute path of the XR to render: the scenario's xr.yaml
	// if it has one, else the composite's.
	XR string
	// Observed and Required are absolute paths of observed.yaml and
	// required.yaml, or empty when the scenario has none.
	Observed, Required string
	// Expected is the absolute path of the scenario's expected.yaml, or
	// empty when it has none.
	Expected string
}

// ID names the scenario as <composite>/<scenario>.
func (s Scenario) ID() string { return s.Composite + "/" + s.Name }

// WithXR returns a scenario of the composite that renders xr alone, with no
// observed or required resources.
func (c Composite) WithXR(name, xr string) Scenario {
	return Scenario{Composite: c.Name, Name: name, XRD: c.XRD, Composition: c.Composition, Functions: c.Functions, XR: xr}
}

// Composites finds every composite folder in exampleDir: each subfolder,
// which must hold the Functions, and whose namesake in
// ConfigurationDir(exampleDir) must hold an XRD and a Composition.
func Composites(exampleDir string) ([]Composite, error) {
	exampleDir, err := filepath.Abs(exampleDir)
	if err != nil {
		return nil, fmt.Errorf("cannot find the examples: %w", err)
	}
	dirs, err := subdirs(exampleDir)
	if err != nil {
		return nil, err
	}
	out := make([]Composite, 0, len(dirs))
	for _, name := range dirs {
		dir := filepath.Join(exampleDir, name)
		pkg := filepath.Join(ConfigurationDir(exampleDir), name)
		c := Composite{
			Name:        name,
			Dir:         dir,
			XRD:         filepath.Join(pkg, FileXRD),
			Composition: filepath.Join(pkg, FileComposition),
			Functions:   filepath.Join(dir, FileFunctions),
		}
		for _, f := range []string{c.XRD, c.Composition, c.Functions} {
			if !isFile(f) {
				return nil, fmt.Errorf("cannot use %s as an example composite: %s is missing", dir, f)
			}
		}
		if xr := filepath.Join(dir, FileXR); isFile(xr) {
			c.XR = xr
		}
		out = append(out, c)
	}
	return out, nil
}

// Discover finds every scenario under exampleDir, sorted by ID. A scenario
// is any subfolder of a composite folder; a composite folder without one
// has the single scenario DefaultScenario.
func Discover(exampleDir string) ([]Scenario, error) {
	composites, err := Composites(exampleDir)
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, c := range composites {
		names, err := subdirs(c.Dir)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			if c.XR == "" {
				return nil, fmt.Errorf("cannot render %s: it has no %s and no scenario folders", c.Dir, FileXR)
			}
			out = append(out, c.WithXR(DefaultScenario, c.XR))
			continue
		}
		for _, name := range names {
			dir := filepath.Join(c.Dir, name)
			s := c.WithXR(name, c.XR)
			if xr := filepath.Join(dir, FileXR); isFile(xr) {
				s.XR = xr
			}
			if s.XR == "" {
				return nil, fmt.Errorf("cannot render scenario %s: neither it nor %s has an %s", dir, c.Dir, FileXR)
			}
			if f := filepath.Join(dir, FileObserved); isFile(f) {
				s.Observed = f
			}
			if f := filepath.Join(dir, FileRequired); isFile(f) {
				s.Required = f
			}
			if f := filepath.Join(dir, FileExpected); isFile(f) {
				s.Expected = f
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cannot find any example in %s", exampleDir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// subdirs lists the names of dir's subfolders, sorted (os.ReadDir sorts).
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		// Dot folders are an editor's or a tool's, never an example.
		if e.IsDir() && e.Name()[0] != '.' {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err == nil && fi.Mode().IsRegular()
}
