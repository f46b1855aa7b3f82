package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// reference is docs/reference.md, from this package's folder.
var reference = filepath.Join("..", "..", "..", "docs", "reference.md")

// A docRow is one row of a spec or status field table of docs/reference.md.
type docRow struct {
	// paths are the fields the row names, under the composite's root
	// (spec.backends[].priority).
	paths []string
	// about and def are its description and default cells.
	about, def string
}

// docRows reads the field tables under the section "## <heading>".
func docRows(t *testing.T, heading string) []docRow {
	t.Helper()
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	in, root := false, ""
	for l := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## "+heading
		case !in:
		case strings.HasPrefix(l, "| spec field"):
			root = "spec"
		case strings.HasPrefix(l, "| status field"):
			root = "status"
		case !strings.HasPrefix(l, "|"):
			root = ""
		case root == "" || strings.HasPrefix(l, "|---"):
		default:
			cells := strings.Split(strings.Trim(l, "| "), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			r := docRow{paths: fieldPaths(t, root, cells[0])}
			if len(cells) > 1 {
				r.about = cells[1]
			}
			if len(cells) > 2 {
				r.def = cells[2]
			}
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/reference.md has no field rows under %q", heading)
	}
	return rows
}

var (
	code   = regexp.MustCompile("`([^`]+)`")
	braces = regexp.MustCompile(`^(.*)\{([^}]*)\}$`)
)

// fieldPaths reads a row's first cell: `a.b`, `.c` (a sibling of the
// previous field) and `a.{b,c}` (both).
func fieldPaths(t *testing.T, root, cell string) []string {
	t.Helper()
	var out []string
	for _, m := range code.FindAllStringSubmatch(cell, -1) {
		f := m[1]
		if strings.HasPrefix(f, ".") {
			if len(out) == 0 {
				t.Fatalf("docs/reference.md: %q starts with a sibling", cell)
			}
			prev := out[len(out)-1]
			f = prev[:strings.LastIndex(prev, ".")] + f
		} else {
			f = root + "." + f
		}
		if b := braces.FindStringSubmatch(f); b != nil {
			for n := range strings.SplitSeq(b[2], ",") {
				out = append(out, b[1]+strings.TrimSpace(n))
			}
			continue
		}
		out = append(out, strings.TrimSuffix(f, "[]"))
	}
	if len(out) == 0 {
		t.Fatalf("docs/reference.md: the row %q names no field", cell)
	}
	return out
}

// TestReferenceMatchesSchema ties docs/reference.md's field tables to the
// generated XRDs: every row names fields the XRD has, every field of the
// XRD has a row, each default is in its row's default column, and each
// range the schema bounds at both ends (minimum and maximum, items, labels)
// is in its row's description as "min to max". Lengths and patterns are
// left out: they are names' limits, not documented field by field.
func TestReferenceMatchesSchema(t *testing.T) {
	for dir, heading := range map[string]string{"gateway": "InferenceGateway", "route": "ModelRoute"} {
		t.Run(dir, func(t *testing.T) {
			fields := map[string]apiextensionsv1.JSONSchemaProps{}
			walk(rootSchema(t, dir), "", func(p string, s apiextensionsv1.JSONSchemaProps) { fields[p] = s })
			rows := docRows(t, heading)
			byPath := map[string]docRow{}
			for _, r := range rows {
				for _, p := range r.paths {
					if _, ok := fields[p]; !ok {
						t.Errorf("docs/reference.md names %s, which the XRD does not have", p)
					}
					byPath[p] = r
				}
			}
			paths := make([]string, 0, len(fields))
			for p := range fields {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			for _, p := range paths {
				s := fields[p]
				r, ok := byPath[p]
				if !ok && leaf(s) && p != "spec" && p != "status" {
					t.Errorf("docs/reference.md has no row for %s", p)
				}
				if s.Default != nil {
					var v any
					if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
						t.Fatal(err)
					}
					if !mentions(r.def, fmt.Sprint(v)) {
						t.Errorf("docs/reference.md's default of %s is %q, want it to say %v", p, r.def, v)
					}
				}
				if lo, hi, ok := bounds(s); ok {
					about := r.about
					if _, own := byPath[p]; !own {
						// An array without a row of its own: its items' rows.
						about = ""
						for q, qr := range byPath {
							if strings.HasPrefix(q, p+".") || strings.HasPrefix(q, p+"[].") {
								about += qr.about + " "
							}
						}
					}
					if !mentions(about, lo+" to "+hi) && !mentions(about, grouped(lo)+" to "+grouped(hi)) {
						t.Errorf("docs/reference.md's row of %s does not say its range, %s to %s: %q", p, lo, hi, about)
					}
				}
			}
		})
	}
}

// bounds is a field's range bounded at both ends: its value's, its items'
// values', its items' count or its properties' count.
func bounds(s apiextensionsv1.JSONSchemaProps) (string, string, bool) {
	num := func(s apiextensionsv1.JSONSchemaProps) (string, string, bool) {
		if s.Minimum == nil || s.Maximum == nil {
			return "", "", false
		}
		return strconv.FormatFloat(*s.Minimum, 'f', -1, 64), strconv.FormatFloat(*s.Maximum, 'f', -1, 64), true
	}
	if lo, hi, ok := num(s); ok {
		return lo, hi, true
	}
	if s.Items != nil && s.Items.Schema != nil {
		if lo, hi, ok := num(*s.Items.Schema); ok {
			return lo, hi, true
		}
	}
	if s.MinItems != nil && s.MaxItems != nil {
		return fmt.Sprint(*s.MinItems), fmt.Sprint(*s.MaxItems), true
	}
	if s.MinProperties != nil && s.MaxProperties != nil {
		return fmt.Sprint(*s.MinProperties), fmt.Sprint(*s.MaxProperties), true
	}
	return "", "", false
}

// mentions reports whether text, without its backticks, has want as whole
// words.
func mentions(text, want string) bool {
	text = strings.ReplaceAll(text, "`", "")
	return regexp.MustCompile(`(^|[^\w.,])` + regexp.QuoteMeta(want) + `($|[^\w])`).MatchString(text)
}

// grouped writes a whole number with thousands separators: 1,000,000.
func grouped(n string) string {
	for i := len(n) - 3; i > 0; i -= 3 {
		n = n[:i] + "," + n[i:]
	}
	return n
}
