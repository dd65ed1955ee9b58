// Command otelcol is the OpenTelemetry Collector that sframe agent's OTLP
// tests start: the collector's own modules (otelcol, the OTLP receiver,
// the debug exporter and the telemetry factory) at one release, in a
// module of its own so that their dependencies stay out of sframekit's
// go.mod. .ci/run builds it with `go build -o BIN .` in this directory.
// Run it with --feature-gates=service.profilesSupport and a config whose
// service has a profiles pipeline.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory()); err != nil {
		return f, err
	}
	return f, nil
}

func main() {
	info := component.BuildInfo{Command: "otelcol", Description: "OpenTelemetry Collector for sframekit's tests", Version: "0.165.0"}
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{BuildInfo: info, Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()}, DefaultScheme: "file"}}})
	if err := cmd.Execute(); err != nil {
		log.Fatal(err)
	}
}
