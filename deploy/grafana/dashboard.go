// Package grafana builds the marketdata Grafana dashboard from the series the
// API nodes and ingest workers export on their admin /metrics. The built
// dashboard is committed as marketdata.json, which operators import; a test
// fails when the file and this code disagree.
package grafana

//go:generate go run ./cmd/gendashboard -o marketdata.json

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// UID is the dashboard's uid: a re-import replaces the dashboard instead of
// adding a second one.
const UID = "marketdata-overview"

// File is the committed dashboard, relative to this package.
const File = "marketdata.json"

// Regenerate is the command that rewrites File from this code.
const Regenerate = "go generate ./deploy/grafana/"

// The datasource variable: every panel and variable queries ${datasource},
// so the dashboard imports into any Grafana whatever its Prometheus is called.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel is the selector of every series: the jobs and instances picked above
// the dashboard (all by default).
const sel = `job=~"$job", instance=~"$instance"`

// m is the metric name with sel and extra matchers, e.g.
// m("x_total", `status="429"`) is x_total{job=~"$job", instance=~"$instance", status="429"}.
func m(name string, matchers ...string) string {
	return name + "{" + strings.Join(append([]string{sel}, matchers...), ", ") + "}"
}

// rate is the per-second rate of a counter over Grafana's rate interval.
func rate(series string) string { return "rate(" + series + "[$__rate_interval])" }

// quantile is the q-quantile of a histogram's buckets, grouped by the labels
// in by (and le).
func quantile(q string, bucket string, by string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%sle) (%s))", q, by, rate(bucket))
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource)
}

// graph is a time series panel of one row: 8 columns wide (three a row).
func graph(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).Description(description).Unit(unit).Min(0).
		Datasource(datasource).Height(8).Span(8).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for _, q := range queries {
		p.WithTarget(q)
	}
	return p
}

// Build is the dashboard.
func Build() (dashboard.Dashboard, error) {
	d, err := build()
	if err != nil {
		return d, err
	}
	number(&d)
	return d, nil
}

// number gives every row and panel its id (1, 2, … in order) and every
// query its refId (A, B, …), which Grafana would otherwise make up on
// import, differently each time the dashboard is saved.
func number(d *dashboard.Dashboard) {
	id := uint32(0)
	for _, p := range d.Panels {
		id++
		if p.RowPanel != nil {
			p.RowPanel.Id = id
			continue
		}
		p.Panel.Id = cog.ToPtr(id)
		for i, t := range p.Panel.Targets {
			if q, ok := t.(prometheus.Dataquery); ok {
				q.RefId = cog.ToPtr(string(rune('A' + i)))
				p.Panel.Targets[i] = q
			}
		}
	}
}

func build() (dashboard.Dashboard, error) {
	return dashboard.NewDashboardBuilder("marketdata").
		Uid(UID).
		Description("marketdata API nodes and ingest workers: freshness, ingest, requests, streams, dependencies, memory. Built by deploy/grafana (Go); see docs/operations.md, \"Dashboards and alerts\".").
		Tags([]string{"marketdata"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("job").
			Label("Job").Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(marketdata_dependency_up, job)")}).
			Definition("label_values(marketdata_dependency_up, job)").
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).IncludeAll(true).AllValue(".*")).
		WithVariable(dashboard.NewQueryVariableBuilder("instance").
			Label("Instance").Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(marketdata_dependency_up{job=~"$job"}, instance)`)}).
			Definition(`label_values(marketdata_dependency_up{job=~"$job"}, instance)`).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).IncludeAll(true).AllValue(".*")).
		// Ingest: how fast committed changes become visible, and how far behind
		// the consumer is.
		WithRow(dashboard.NewRowBuilder("Ingest")).
		WithPanel(graph("Freshness p50 / p99",
			"Stream arrival to visible in Redis (marketdata_ingest_freshness_seconds), all workers. p99 above 0.25 s warns, above 1 s pages (MarketdataFreshnessHigh).",
			units.Seconds,
			query(quantile("0.5", m("marketdata_ingest_freshness_seconds_bucket"), ""), "p50"),
			query(quantile("0.99", m("marketdata_ingest_freshness_seconds_bucket"), ""), "p99")).Span(6)).
		WithPanel(graph("Ingest messages / s by outcome",
			"applied; ignored (not newer than what is stored); rejected (invalid: see the DLQ and docs/matchers.md).",
			units.OpsPerSecond,
			query("sum by (outcome) ("+rate(m("marketdata_ingest_messages_total"))+")", "{{outcome}}")).Span(6)).
		WithPanel(graph("Consumer pending",
			"Messages of the durable consumer not yet acknowledged: undelivered plus in flight. Every worker reports the same consumer, so this is the max, not the sum.",
			units.Short,
			query("max("+m("marketdata_ingest_consumer_pending")+")", "pending")).Span(6)).
		WithPanel(graph("Batch time p99",
			"First message of a batch in hand to its acknowledgement: Postgres, Redis and the change notice. Above 0.2 s: one of them is slow.",
			units.Seconds,
			query(quantile("0.99", m("marketdata_ingest_batch_seconds_bucket"), ""), "p99")).Span(6)).
		// API: what clients get.
		WithRow(dashboard.NewRowBuilder("API")).
		WithPanel(graph("Requests / s by route and status",
			"Every answer of the API nodes; route \"unparsed\" counts requests the HTTP parser could not read (400, 408, 413, 431).",
			units.RequestsPerSecond,
			query("sum by (route, status) ("+rate(m("marketdata_http_requests_total"))+")", "{{route}} {{status}}"))).
		WithPanel(graph("Answer time p99 by route",
			"marketdata_http_request_seconds, all nodes.",
			units.Seconds,
			query(quantile("0.99", m("marketdata_http_request_seconds_bucket"), "route, "), "{{route}}"))).
		WithPanel(graph("429s / s",
			"Rate-limited answers by route (the account's window, failed authentications from an address, or 10 open streams), and stream opens refused for the open-stream limit.",
			units.RequestsPerSecond,
			query("sum by (route) ("+rate(m("marketdata_http_requests_total", `status="429"`))+")", "{{route}}"),
			query("sum("+rate(m("marketdata_streams_refused_total"))+")", "stream opens refused"))).
		WithPanel(graph("5xx ratio",
			"Share of answers with a 5xx status (MarketdataHTTP5xxRatio fires above 1 % for 5 minutes).",
			units.PercentUnit,
			query("sum("+rate(m("marketdata_http_requests_total", `status=~"5.."`))+") / sum("+rate(m("marketdata_http_requests_total"))+")", "5xx")).Span(12)).
		WithPanel(graph("Open client connections",
			"Per node, with the node's MD_MAX_CONNS cap. Stream-heavy fleets scale on this rather than on CPU.",
			units.Short,
			query("sum by (instance) ("+m("marketdata_http_connections_open")+")", "{{instance}}"),
			query("max("+m("marketdata_http_connections_max")+")", "MD_MAX_CONNS")).Span(12)).
		// Streams.
		WithRow(dashboard.NewRowBuilder("Streams")).
		WithPanel(graph("Streams open",
			"WebSocket streams open per node.",
			units.Short,
			query("sum by (instance) ("+m("marketdata_streams_open")+")", "{{instance}}")).Span(6)).
		WithPanel(graph("Price deliveries / s",
			"Price messages written to streams, per node.",
			units.OpsPerSecond,
			query("sum by (instance) ("+rate(m("marketdata_stream_messages_total", `type="price"`))+")", "{{instance}}")).Span(6)).
		WithPanel(graph("Conflated / s",
			"Price versions replaced by a newer one of the same market before a slow client took them: normal for clients slower than their markets.",
			units.OpsPerSecond,
			query("sum by (instance) ("+rate(m("marketdata_stream_conflated_total"))+")", "{{instance}}")).Span(6)).
		WithPanel(graph("Stream closes / s by code",
			"4008: the client read nothing for 30 s while messages waited (MarketdataStreams4008Bulk); 4401 key revoked or expired; 4403 access withdrawn; 1001 node shutting down.",
			units.OpsPerSecond,
			query("sum by (code) ("+rate(m("marketdata_stream_closes_total"))+")", "{{code}}")).Span(6)).
		// Dependencies and the cache's repair.
		WithRow(dashboard.NewRowBuilder("Dependencies")).
		WithPanel(statetimeline.NewPanelBuilder().
			Title("Dependency checks (worst node)").
			Description("marketdata_dependency_up per /readyz check, the minimum over the selected nodes: down on any node shows down. redis, postgres, postgres_replica, nats and jetstream are dependencies; schema, search_index and data are the node's own state.").
			Datasource(datasource).Height(8).Span(12).
			Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
				Type: dashboard.MappingTypeValueToText,
				Options: map[string]dashboard.ValueMappingResult{
					"0": {Text: cog.ToPtr("down"), Color: cog.ToPtr("red")},
					"1": {Text: cog.ToPtr("up"), Color: cog.ToPtr("green")},
				},
			}}}).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone)).
			WithTarget(query("min by (dependency) ("+m("marketdata_dependency_up")+")", "{{dependency}}"))).
		WithPanel(graph("Nodes by /readyz status",
			"How many nodes answer ready, degraded (200, a degradable check failing: keep the traffic, fix the dependency) or unavailable (503: no traffic).",
			units.Short,
			query("sum by (status) ("+m("marketdata_readyz_status")+")", "{{status}}")).Span(12)).
		WithPanel(graph("Redis nodes down",
			"Redis Cluster nodes flagged failed (or 1 while a single server does not answer), the worst node's view.",
			units.Short,
			query("max("+m("marketdata_redis_nodes_down")+")", "nodes down"))).
		WithPanel(graph("Anti-entropy repairs",
			"Cache entries the anti-entropy pass found behind Postgres and rewrote, by kind, per interval. A step after a Redis failover is expected; repairs that keep coming are not (MarketdataAntiEntropyRepairing).",
			units.Short,
			query("sum by (kind) (increase("+m("marketdata_ingest_antientropy_repaired_total")+"[$__rate_interval]))", "{{kind}}"))).
		WithPanel(stat.NewPanelBuilder().
			Title("Since the last full anti-entropy pass").
			Description("A pass over every document takes about 5 minutes for 150,000 documents; this should not grow much beyond that.").
			Datasource(datasource).Height(8).Span(8).Unit(units.Seconds).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
			Orientation(common.VizOrientationAuto).
			WithTarget(query("time() - max("+m("marketdata_ingest_antientropy_last_pass_timestamp_seconds")+" > 0)", "since last pass"))).
		// Node resources.
		WithRow(dashboard.NewRowBuilder("Node")).
		WithPanel(graph("Resident memory",
			"process_resident_memory_bytes per process. An API node holds every price item (~0.45 KB a market) and its connections.",
			units.BytesIEC,
			query(m("process_resident_memory_bytes"), "{{job}} {{instance}}"))).
		WithPanel(graph("Go heap in use and price replica",
			"go_memstats_heap_inuse_bytes per process, and the API nodes' price replica (marketdata_replica_bytes) within it.",
			units.BytesIEC,
			query(m("go_memstats_heap_inuse_bytes"), "heap {{job}} {{instance}}"),
			query(m("marketdata_replica_bytes"), "replica {{instance}}"))).
		WithPanel(graph("CPU",
			"Cores used per process.",
			units.Short,
			query(rate(m("process_cpu_seconds_total")), "{{job}} {{instance}}"))).
		Build()
}

// JSON is the dashboard as committed in File: indented, with a final newline.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, fmt.Errorf("grafana: build dashboard: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // PromQL's > and < stay readable
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("grafana: encode dashboard: %w", err)
	}
	return buf.Bytes(), nil
}
