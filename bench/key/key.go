// Package key is the key benchmark: GET /public/v1/key through the full
// middleware against a bare Fiber handler.
package key

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/marketdata/marketdata/bench/baseline"
	"github.com/marketdata/marketdata/bench/world"
)

// goalKeyRatio: GET /public/v1/key through the full middleware must reach at
// least this share of a bare Fiber handler's throughput (issue 18).
const goalKeyRatio = 0.60

// KeyResult is bench-results/key.json.
type KeyResult struct {
	Bench    string               `json:"bench"`
	Machine  world.Machine        `json:"machine"`
	Compare  baseline.HTTPCompare `json:"compare"`
	ChildLog string               `json:"child_log"`
}

func Run(ctx context.Context, o *world.Options, log *slog.Logger) (any, error) {
	sb, dsn, err := world.Open(ctx, o, log, "api")
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	res := &KeyResult{Bench: "key", Machine: o.Machine, ChildLog: filepath.Join(o.Out, "key-child.log")}
	node, err := world.StartAPINode(ctx, o, sb, dsn, res.ChildLog)
	if err != nil {
		return nil, err
	}
	defer world.StopNode(node, log)
	if res.Compare, err = baseline.Compare(ctx, o, node, "", "/public/v1/key", goalKeyRatio, baseline.HTTPPlan, log); err != nil {
		return nil, err
	}
	baseline.PrintCompare(o.Machine, []baseline.HTTPCompare{res.Compare})
	return res, nil
}
