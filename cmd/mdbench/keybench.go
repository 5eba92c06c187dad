package main

import (
	"context"
	"log/slog"
	"path/filepath"
)

// goalKeyRatio: GET /public/v1/key through the full middleware must reach at
// least this share of a bare Fiber handler's throughput (issue 18).
const goalKeyRatio = 0.60

// KeyResult is bench-results/key.json.
type KeyResult struct {
	Bench    string      `json:"bench"`
	Machine  Machine     `json:"machine"`
	Compare  HTTPCompare `json:"compare"`
	ChildLog string      `json:"child_log"`
}

func runKeyBench(ctx context.Context, o *Options, log *slog.Logger) (any, error) {
	sb, err := NewSandbox(ctx, o, log)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	dsn, err := sb.Database(ctx, "api")
	if err != nil {
		return nil, err
	}
	res := &KeyResult{Bench: "key", Machine: o.Machine, ChildLog: filepath.Join(o.Out, "key-child.log")}
	node, err := StartAPINode(ctx, o, sb, dsn, res.ChildLog)
	if err != nil {
		return nil, err
	}
	defer stopNode(node, log)
	if res.Compare, err = compare(ctx, o, node, "", "/public/v1/key", goalKeyRatio, httpPlan, log); err != nil {
		return nil, err
	}
	printCompare(o.Machine, []HTTPCompare{res.Compare})
	return res, nil
}
