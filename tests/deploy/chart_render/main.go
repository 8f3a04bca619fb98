// chart_render renders a Helm chart's templates without Helm, which Debian
// does not package, so the tests can check the YAML a `helm template` of
// deploy/helm/gpuleak-exporter would give. It is Helm's rendering as far as
// the chart uses it: Go's text/template with sprig's functions (Debian's
// golang-github-masterminds-sprig-dev), Helm's toYaml/include/required, the
// .Values, .Release and .Chart objects, and --set overrides.
//
//	chart_render [--set path.to.key=value]... [--release NAME] [--namespace NS] CHART_DIR
//
// Writes every rendered manifest to stdout as one multi-document YAML
// stream, each after a "# Source: <chart>/templates/<file>" line as Helm
// writes them; templates that render to nothing are left out. A missing
// value, a template error or an unreadable file exits 1 with the reason.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "chart_render: "+format+"\n", args...)
	os.Exit(1)
}

func readYAML(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		fail("%s: %v", path, err)
	}
	return out
}

// applySet sets "a.b.c=value" in values; the value is read as YAML, as
// Helm reads --set scalars (numbers, booleans, strings).
func applySet(values map[string]interface{}, assignment string) {
	key, raw, found := strings.Cut(assignment, "=")
	if !found || key == "" {
		fail("--set %q: write path.to.key=value", assignment)
	}
	var value interface{}
	if err := yaml.Unmarshal([]byte(raw), &value); err != nil {
		value = raw
	}
	parts := strings.Split(key, ".")
	node := values
	for _, part := range parts[:len(parts)-1] {
		next, ok := node[part].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			node[part] = next
		}
		node = next
	}
	node[parts[len(parts)-1]] = value
}

// chartObject is .Chart: Chart.yaml's keys with their first letter upper
// case (appVersion -> AppVersion), as Helm exposes them.
func chartObject(chart map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for key, value := range chart {
		out[strings.ToUpper(key[:1])+key[1:]] = value
	}
	return out
}

func toYAML(value interface{}) string {
	var buffer bytes.Buffer
	encoder := yaml.NewEncoder(&buffer)
	encoder.SetIndent(2)
	if err := encoder.Encode(value); err != nil {
		return ""
	}
	return strings.TrimSuffix(buffer.String(), "\n")
}

func main() {
	var sets setFlags
	flag.Var(&sets, "set", "path.to.key=value (repeatable)")
	release := flag.String("release", "gpuleak", "release name")
	namespace := flag.String("namespace", "gpuleak", "release namespace")
	flag.Parse()
	if flag.NArg() != 1 {
		fail("usage: chart_render [--set k=v]... [--release NAME] [--namespace NS] CHART_DIR")
	}
	chartDir := flag.Arg(0)
	chart := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	values := readYAML(filepath.Join(chartDir, "values.yaml"))
	for _, assignment := range sets {
		applySet(values, assignment)
	}
	chartName, _ := chart["name"].(string)
	root := map[string]interface{}{
		"Values":  values,
		"Chart":   chartObject(chart),
		"Release": map[string]interface{}{"Name": *release, "Namespace": *namespace, "Service": "Helm", "IsInstall": true},
	}

	templates := template.New(chartName).Option("missingkey=error")
	functions := sprig.TxtFuncMap()
	functions["toYaml"] = toYAML
	functions["include"] = func(name string, data interface{}) (string, error) {
		var buffer bytes.Buffer
		err := templates.ExecuteTemplate(&buffer, name, data)
		return buffer.String(), err
	}
	functions["required"] = func(message string, value interface{}) (interface{}, error) {
		if value == nil || value == "" {
			return nil, fmt.Errorf("%s", message)
		}
		return value, nil
	}
	templates.Funcs(functions)

	paths, _ := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	sort.Strings(paths)
	var manifests []string
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			fail("%v", err)
		}
		name := chartName + "/templates/" + filepath.Base(path)
		if _, err := templates.New(name).Parse(string(text)); err != nil {
			fail("%v", err)
		}
		base := filepath.Base(path)
		if !strings.HasPrefix(base, "_") && (strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")) {
			manifests = append(manifests, name)
		}
	}
	for _, name := range manifests {
		var buffer bytes.Buffer
		if err := templates.ExecuteTemplate(&buffer, name, root); err != nil {
			fail("%v", err)
		}
		if strings.TrimSpace(buffer.String()) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", name, strings.TrimSpace(buffer.String()))
	}
}
