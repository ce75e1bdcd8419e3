// Package telemetry sets up OpenTelemetry traces and metrics for the API
// and is the only package that imports OpenTelemetry. With
// OTEL_EXPORTER_OTLP_ENDPOINT set it exports both over OTLP/HTTP;
// otherwise metrics are served for Prometheus at /metrics and spans are
// not exported.
//
// MCP metrics follow the OpenTelemetry semantic conventions for MCP
// (mcp.method.name, gen_ai.tool.name, error.type, mcp.protocol.version).
// No metric or span ever carries a tenant, a user or a token: callers pass
// only the attributes this package defines.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config selects the exporters.
type Config struct {
	ServiceName    string
	ServiceVersion string
	// OTLPEndpoint, when set, sends traces and metrics over OTLP/HTTP (the
	// exporters also read the standard OTEL_EXPORTER_OTLP_* variables).
	OTLPEndpoint string
}

// Telemetry holds the providers and the instruments.
type Telemetry struct {
	tracer   trace.Tracer
	metrics  http.Handler // nil with OTLP
	shutdown []func(context.Context) error

	opDuration   metric.Float64Histogram
	httpDuration metric.Float64Histogram
	refused      metric.Int64Counter
	limited      metric.Int64Counter
}

// Setup builds the providers. Shutdown flushes them.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	res := resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName), semconv.ServiceVersion(cfg.ServiceVersion))
	t := &Telemetry{}
	var mp *sdkmetric.MeterProvider
	if cfg.OTLPEndpoint != "" {
		te, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
		t.tracer = tp.Tracer("codelotse")
		t.shutdown = append(t.shutdown, tp.Shutdown)
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, err
		}
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)), sdkmetric.WithResource(res))
	} else {
		t.tracer = noop.NewTracerProvider().Tracer("codelotse")
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, err
		}
		mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	t.shutdown = append(t.shutdown, mp.Shutdown)
	inst, err := newWith(t.tracer, mp)
	if err != nil {
		return nil, err
	}
	inst.metrics, inst.shutdown = t.metrics, t.shutdown
	return inst, nil
}

// newWith creates the instruments on a meter provider.
func newWith(tracer trace.Tracer, mp metric.MeterProvider) (*Telemetry, error) {
	t := &Telemetry{tracer: tracer}
	m := mp.Meter("codelotse")
	buckets := metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	var err error
	if t.opDuration, err = m.Float64Histogram("mcp.server.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of MCP requests handled by the server."), buckets); err != nil {
		return nil, err
	}
	if t.httpDuration, err = m.Float64Histogram("http.server.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests."), buckets); err != nil {
		return nil, err
	}
	if t.refused, err = m.Int64Counter("codelotse.mcp.auth.refused", metric.WithUnit("{request}"),
		metric.WithDescription("Bearer requests refused with 401, by reason.")); err != nil {
		return nil, err
	}
	if t.limited, err = m.Int64Counter("codelotse.mcp.rate_limited", metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused with 429, by limit (ip or token).")); err != nil {
		return nil, err
	}
	return t, nil
}

// Disabled returns telemetry that records nothing (tests, benchmarks).
func Disabled() *Telemetry {
	t, err := newWith(noop.NewTracerProvider().Tracer("codelotse"), metricnoop.NewMeterProvider())
	if err != nil {
		panic(err) // instrument names are constants
	}
	return t
}

// MetricsHandler serves /metrics, or nil when metrics go over OTLP.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// MCPOperation describes one MCP request for the operation metric and span.
// It has no field for a tenant, user or token on purpose.
type MCPOperation struct {
	Method          string // JSON-RPC method, e.g. tools/call
	Tool            string // tool name for tools/call
	ProtocolVersion string
	// ErrorType is empty on success, "tool_error" for isError results, or
	// the JSON-RPC error code.
	ErrorType string
}

func (o MCPOperation) attrs() []attribute.KeyValue {
	a := []attribute.KeyValue{attribute.String("mcp.method.name", o.Method), attribute.String("network.transport", "tcp")}
	if o.Tool != "" {
		a = append(a, attribute.String("gen_ai.tool.name", o.Tool))
	}
	if o.ProtocolVersion != "" {
		a = append(a, attribute.String("mcp.protocol.version", o.ProtocolVersion))
	}
	if o.ErrorType != "" {
		a = append(a, attribute.String("error.type", o.ErrorType))
	}
	return a
}

// RecordMCP records one MCP operation that took d.
func (t *Telemetry) RecordMCP(ctx context.Context, o MCPOperation, d time.Duration) {
	t.opDuration.Record(ctx, d.Seconds(), metric.WithAttributes(o.attrs()...))
}

// RecordHTTP records one HTTP request by method, route and status.
func (t *Telemetry) RecordHTTP(ctx context.Context, method, route string, status int, d time.Duration) {
	t.httpDuration.Record(ctx, d.Seconds(), metric.WithAttributes(
		attribute.String("http.request.method", method), attribute.String("http.route", route), attribute.Int("http.response.status_code", status)))
}

// Refused counts a 401 by reason (missing, malformed, unknown, revoked, …).
func (t *Telemetry) Refused(ctx context.Context, reason string) {
	t.refused.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

// Limited counts a 429 by limit ("ip" or "token").
func (t *Telemetry) Limited(ctx context.Context, limit string) {
	t.limited.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
}

// StartHTTP starts the server span of a request; end sets its status.
func (t *Telemetry) StartHTTP(ctx context.Context, method, route string) (context.Context, func(status int)) {
	ctx, span := t.tracer.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route)))
	return ctx, func(status int) {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		span.End()
	}
}

// StartMCP starts the span of an MCP operation ("tools/call get_rules").
func (t *Telemetry) StartMCP(ctx context.Context, method, tool string) (context.Context, func(o MCPOperation)) {
	name := method
	if tool != "" {
		name += " " + tool
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(o MCPOperation) {
		span.SetAttributes(o.attrs()...)
		span.End()
	}
}

// Recorder keeps spans and metrics in memory, so tests can read exactly
// what would have been exported.
type Recorder struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// NewRecorded returns telemetry that records into memory.
func NewRecorded() (*Telemetry, *Recorder) {
	rec := &Recorder{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rec.reader))
	t, err := newWith(tp.Tracer("codelotse"), mp)
	if err != nil {
		panic(err) // instrument names are constants
	}
	return t, rec
}

// Dump renders every recorded span (name and attributes) and every metric
// data point's attributes, one per line.
func (r *Recorder) Dump(ctx context.Context) string {
	var b strings.Builder
	for _, s := range r.spans.Ended() {
		fmt.Fprintf(&b, "span %q", s.Name())
		for _, a := range s.Attributes() {
			fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
		}
		b.WriteByte('\n')
	}
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(ctx, &rm); err != nil {
		fmt.Fprintf(&b, "collect error: %v\n", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				fmt.Fprintf(&b, "metric %s", m.Name)
				for _, a := range set.ToSlice() {
					fmt.Fprintf(&b, " %s=%s", a.Key, a.Value.String())
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}
