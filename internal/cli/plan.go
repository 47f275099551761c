package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/scalechat/scalechat/internal/capacity"
)

// planInput is the plan's input as written: flags or a YAML file with the
// same names (rooms_per_user or rooms-per-user).
type planInput struct {
	Users        string `yaml:"users"`
	RoomsPerUser string `yaml:"rooms_per_user"`
	RoomSize     string `yaml:"room_size"`
	Rate         string `yaml:"rate"`
	MsgSize      string `yaml:"msg_size"`
	History      string `yaml:"history"`
	Spanning     string `yaml:"spanning"`
	Cores        string `yaml:"cores"`
	Memory       string `yaml:"memory"`
	Files        string `yaml:"files"`
	Headroom     string `yaml:"headroom"`
	From         string `yaml:"from"`
}

func defaultPlanInput() planInput {
	return planInput{RoomsPerUser: "1", RoomSize: "10", Rate: "1/min", MsgSize: "256", History: "100",
		Cores: "8", Memory: "16GiB", Files: "1048576", Headroom: "50%"}
}

func newPlanCmd() *cobra.Command {
	in := defaultPlanInput()
	cmd := &cobra.Command{
		Use:   "plan [FILE.yaml]",
		Short: "How many machines do we need: nodes, Redis shards, memory, files and bandwidth for a workload",
		Long: `plan answers "how many machines do we need" for a workload: how many nodes (and Redis
shards when there are several), CPU, memory and open files per node, and bandwidth per node
and in total, in and out, WebSocket framing included, keeping --headroom of every node's
CPU free. It uses the server's costs measured by scalechat bench: by default the committed
results of benchmarks/results, which the binary embeds and docs/benchmarks.md shows
(measured on a 2 vCPU AMD EPYC VM), or, with --from, a file
of "scalechat bench --json FILE idle rooms oneroom compression cluster transports" run on your own
machine. It prints the model, its assumptions and where each figure came from.

The workload comes from flags or from a YAML file with the same names (users, rooms_per_user,
room_size, rate, msg_size, history, spanning, cores, memory, files, headroom, from); flags
given on the command line win over the file. Counts take k and M (1M), rates /s, /min or /h
(1/min, 20/s), sizes B, KiB, MiB, GiB (256, 16GiB), shares a percentage (50%).

How far off it is: docs/capacity.md.`,
		Example: `  scalechat plan --users 1M --rooms-per-user 5 --room-size 20 --rate 1/min --msg-size 256
  scalechat plan --users 50k --room-size 200 --rate 1/s --cores 2 --memory 4GiB
  scalechat plan workload.yaml --headroom 30%
  scalechat bench --json bench.json idle rooms oneroom compression cluster transports && scalechat plan --from bench.json --users 1M`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				if err := mergePlanFile(&in, args[0], c.Flags()); err != nil {
					return &exitError{code: exitUsage, err: err}
				}
			}
			p, err := makePlan(in)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return capacity.Write(c.OutOrStdout(), p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Users, "users", in.Users, "users connected at once, one connection each (e.g. 1M)")
	f.StringVar(&in.RoomsPerUser, "rooms-per-user", in.RoomsPerUser, "rooms each user's connection is in")
	f.StringVar(&in.RoomSize, "room-size", in.RoomSize, "members of a room")
	f.StringVar(&in.Rate, "rate", in.Rate, "messages a user sends, over all its rooms (e.g. 1/min, 20/s)")
	f.StringVar(&in.MsgSize, "msg-size", in.MsgSize, "bytes of the chat JSON object a client sends")
	f.StringVar(&in.History, "history", in.History, "messages kept per room (scalechat serve --history)")
	f.StringVar(&in.Spanning, "spanning", in.Spanning, "share of rooms with members on several nodes (default: 100% when users are in several rooms, else 0%)")
	f.StringVar(&in.Cores, "cores", in.Cores, "cores per node")
	f.StringVar(&in.Memory, "memory", in.Memory, "memory per node")
	f.StringVar(&in.Files, "files", in.Files, "open files a node's process may have (ulimit -n)")
	f.StringVar(&in.Headroom, "headroom", in.Headroom, "share of each node's CPU kept free (deploys' reconnect storms, a lost node, bursts)")
	f.StringVar(&in.From, "from", in.From, "costs from this file of scalechat bench --json instead of the committed results (benchmarks/results)")
	return cmd
}

// mergePlanFile fills in from the YAML file, except the flags given.
func mergePlanFile(in *planInput, path string, flags *pflag.FlagSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the workload: %w", err)
	}
	var raw map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%s is not a YAML mapping of the plan's fields: %w", path, err)
	}
	fields := map[string]*string{"users": &in.Users, "rooms_per_user": &in.RoomsPerUser, "room_size": &in.RoomSize,
		"rate": &in.Rate, "msg_size": &in.MsgSize, "history": &in.History, "spanning": &in.Spanning, "cores": &in.Cores,
		"memory": &in.Memory, "files": &in.Files, "headroom": &in.Headroom, "from": &in.From}
	for key, node := range raw {
		name := key
		for i := range len(name) {
			if name[i] == '-' {
				name = name[:i] + "_" + name[i+1:]
			}
		}
		dst, ok := fields[name]
		if !ok {
			return fmt.Errorf("%s: unknown field %q (known: users, rooms_per_user, room_size, rate, msg_size, history, spanning, cores, memory, files, headroom, from)", path, key)
		}
		if node.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: %s must be a single value", path, key)
		}
		flag := ""
		for i := range len(name) {
			if name[i] == '_' {
				flag += "-"
			} else {
				flag += string(name[i])
			}
		}
		if !flags.Changed(flag) {
			*dst = node.Value
		}
	}
	return nil
}

// makePlan parses the input and plans.
func makePlan(in planInput) (capacity.Plan, error) {
	var w capacity.Workload
	var n capacity.Node
	var err error
	parse := func(dst *float64, name, s string, p func(string) (float64, error)) {
		if err != nil {
			return
		}
		if s == "" {
			err = fmt.Errorf("--%s is required", name)
			return
		}
		var v float64
		if v, err = p(s); err != nil {
			err = fmt.Errorf("--%s: %w", name, err)
		}
		*dst = v
	}
	parse(&w.Users, "users", in.Users, capacity.ParseCount)
	parse(&w.RoomsPerUser, "rooms-per-user", in.RoomsPerUser, capacity.ParseCount)
	parse(&w.RoomSize, "room-size", in.RoomSize, capacity.ParseCount)
	parse(&w.Rate, "rate", in.Rate, capacity.ParseRate)
	parse(&w.MsgSize, "msg-size", in.MsgSize, capacity.ParseBytes)
	parse(&w.History, "history", in.History, capacity.ParseCount)
	parse(&n.Cores, "cores", in.Cores, capacity.ParseCount)
	parse(&n.Memory, "memory", in.Memory, capacity.ParseBytes)
	parse(&n.Files, "files", in.Files, capacity.ParseCount)
	parse(&n.Headroom, "headroom", in.Headroom, func(s string) (float64, error) { return capacity.ParsePercent(s, false) })
	w.Spanning = -1
	if in.Spanning != "" {
		parse(&w.Spanning, "spanning", in.Spanning, func(s string) (float64, error) { return capacity.ParsePercent(s, true) })
	}
	if err != nil {
		return capacity.Plan{}, err
	}
	var figs []capacity.Figure
	if in.From != "" {
		figs, err = capacity.FromBench(in.From)
	} else {
		figs, err = capacity.LabFigures()
	}
	if err != nil {
		return capacity.Plan{}, err
	}
	costs, err := capacity.Derive(figs)
	if err != nil {
		return capacity.Plan{}, err
	}
	return capacity.Make(w, n, costs)
}
