package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the environment twin of every flag: --max-queue is also
// SCALECHAT_MAX_QUEUE.
const envPrefix = "SCALECHAT_"

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv gives every flag of cmd an environment variable twin, named in
// its help text. A flag given on the command line wins over its variable.
func bindEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		f.Usage += fmt.Sprintf(" (env %s)", envName(f.Name))
	})
	prev := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		var err error
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if err != nil || f.Changed || f.Name == "help" {
				return
			}
			v, ok := os.LookupEnv(envName(f.Name))
			if !ok {
				return
			}
			if sl, isSlice := f.Value.(pflag.SliceValue); isSlice {
				err = sl.Replace(strings.Split(v, ","))
			} else {
				err = f.Value.Set(v)
			}
			if err != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", envName(f.Name), v, err)
			}
		})
		if err != nil || prev == nil {
			return err
		}
		return prev(cmd, args)
	}
}

// byteSize is a flag value in bytes that accepts units: 16KiB, 4MiB, 1GiB,
// 512B or a plain number. K, KB and KiB all mean 1024.
type byteSize int

func (b *byteSize) String() string {
	n := int(*b)
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	mult := 1
	units := []struct {
		suffix string
		mult   int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size such as 4096, 16KiB or 4MiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) Type() string { return "size" }
