//go:build linux

package cli

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/namespace"
)

// A configuration file (scalechat serve --config, docs/config.md) holds
// the value of any serve flag under the flag's own name, and the
// namespaces. Its values come after the command line and the environment:
// flag > environment variable > file > default.

// notInFile are the flags a file cannot set: they say which file to read,
// or what to do with it.
var notInFile = map[string]bool{"config": true, "check-config": true, "help": true}

// configFile is what a configuration file gave: the namespaces (its flag
// values went into the flag set).
type configFile struct {
	namespaces namespace.Set
}

// applyConfigFile reads the configuration file at path and sets every flag
// of fs that neither the command line nor its environment variable set. It
// checks every value, also of the flags it does not set, and returns every
// error, each one sentence naming its line.
func applyConfigFile(fs *pflag.FlagSet, path string) (configFile, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return configFile{}, []error{fmt.Errorf("cannot read the configuration file: %w", err)}
	}
	return applyConfig(fs, data, os.LookupEnv)
}

// applyConfig is applyConfigFile on the file's contents; lookupEnv says
// which environment variables are set.
func applyConfig(fs *pflag.FlagSet, data []byte, lookupEnv func(string) (string, bool)) (configFile, []error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return configFile{}, []error{yamlError(err)}
	}
	var cf configFile
	if len(doc.Content) == 0 {
		return cf, nil // an empty file: nothing to set
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return cf, []error{namespace.Errorf(root, "the file must be a mapping of flag names to values, such as addr: 127.0.0.1:8080")}
	}
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			errs = append(errs, namespace.Errorf(k, "%s is set twice", k.Value))
			continue
		}
		seen[k.Value] = true
		if k.Value == "namespaces" {
			set, nerrs := namespace.Parse(v)
			cf.namespaces = set
			errs = append(errs, nerrs...)
			continue
		}
		if err := applyKey(fs, k, v, lookupEnv); err != nil {
			errs = append(errs, err)
		}
	}
	return cf, errs
}

// applyKey checks one key of the file and its value, and sets its flag
// unless the command line or the environment did.
func applyKey(fs *pflag.FlagSet, k, v *yaml.Node, lookupEnv func(string) (string, bool)) error {
	f := fs.Lookup(k.Value)
	switch {
	case f == nil && fs.Lookup(strings.ReplaceAll(k.Value, "_", "-")) != nil:
		return namespace.Errorf(k, "unknown key %q: flags are spelled with dashes, %s", k.Value, strings.ReplaceAll(k.Value, "_", "-"))
	case f == nil:
		return namespace.Errorf(k, "unknown key %q: not a flag of scalechat serve, nor namespaces (scalechat serve --help lists them)", k.Value)
	case notInFile[k.Value]:
		return namespace.Errorf(k, "%s cannot be set in the file: give it on the command line", k.Value)
	}
	values, err := scalarValues(f, v)
	if err != nil {
		return namespace.Errorf(v, "%s %s", k.Value, err.Error())
	}
	// Checked on a copy of the flag's value, so that a value the command
	// line overrides is checked too.
	probe := newServeFlagSet().Lookup(f.Name)
	if err := setValues(probe, values); err != nil {
		return namespace.Errorf(v, "%s %s, got %s", k.Value, typeRule(f), quoteValue(v))
	}
	if _, env := lookupEnv(envName(f.Name)); f.Changed || env {
		return nil // flag > environment > file
	}
	return setValues(f, values)
}

// scalarValues returns the strings a flag is set from: a scalar's value,
// or each element of a list for a list flag.
func scalarValues(f *pflag.Flag, v *yaml.Node) ([]string, error) {
	_, isSlice := f.Value.(pflag.SliceValue)
	switch {
	case v.Kind == yaml.SequenceNode && isSlice:
		var vs []string
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, errors.New("must be a list of values")
			}
			vs = append(vs, e.Value)
		}
		return vs, nil
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil, errors.New("has no value: give one, or leave the key out for the default")
	case v.Kind != yaml.ScalarNode:
		return nil, fmt.Errorf("%s, got %s", typeRule(f), quoteValue(v))
	case isSlice:
		return strings.Split(v.Value, ","), nil
	}
	return []string{v.Value}, nil
}

// setValues sets f from values: the one value, or the list.
func setValues(f *pflag.Flag, values []string) error {
	if sl, ok := f.Value.(pflag.SliceValue); ok {
		return sl.Replace(values)
	}
	return f.Value.Set(values[0])
}

// typeRule says in words what a value of f must be.
func typeRule(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "must be true or false"
	case "int":
		return "must be a whole number"
	case "float64":
		return "must be a number"
	case "duration":
		return "must be a duration such as 10s, 5m or 1h"
	case "size":
		return "must be a size such as 4096, 16KiB or 4MiB"
	case "stringSlice":
		return "must be a list of values, or one value with commas between them"
	}
	return "must be a text value"
}

// quoteValue shows a value in an error.
func quoteValue(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if v.Tag == "!!str" {
		return strconv.Quote(v.Value)
	}
	return v.Value
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into a sentence that starts with its
// line, as the other errors do.
func yamlError(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &namespace.Error{Line: n, Msg: "the file is not valid YAML: " + m[2]}
	}
	return fmt.Errorf("the file is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}
