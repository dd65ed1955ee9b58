package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// otlp exports profiles as OpenTelemetry profiles (the v1development
// protocol, through the collector's pdata), over OTLP/HTTP (an
// http:// or https:// endpoint: POST /v1development/profiles, protobuf
// body) or OTLP/gRPC (host:port).
type otlp struct {
	httpURL string // OTLP/HTTP; "" for gRPC
	client  *http.Client
	conn    *grpc.ClientConn
	grpc    pprofileotlp.GRPCClient
}

func newOTLP(endpoint string) (*otlp, error) {
	if strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("sframe agent: --otlp %q: want http://HOST:PORT (OTLP/HTTP) or HOST:PORT (OTLP/gRPC)", endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1development/profiles"
		}
		return &otlp{httpURL: u.String(), client: &http.Client{}}, nil
	}
	target := strings.TrimPrefix(endpoint, "grpc://")
	if _, port, err := net.SplitHostPort(target); err != nil || port == "" {
		return nil, fmt.Errorf("sframe agent: --otlp %q: want http://HOST:PORT (OTLP/HTTP) or HOST:PORT (OTLP/gRPC)", endpoint)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("sframe agent: --otlp %q: %v", endpoint, err)
	}
	return &otlp{conn: conn, grpc: pprofileotlp.NewGRPCClient(conn)}, nil
}

// send implements sender: a refusal (HTTP 4xx but 429, gRPC
// InvalidArgument) is errRefused.
func (o *otlp) send(ctx context.Context, s *shipment) error {
	pd, err := toOTLP(s)
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	req := pprofileotlp.NewExportRequestFromProfiles(pd)
	if o.grpc != nil {
		_, err := o.grpc.Export(ctx, req)
		if st, ok := status.FromError(err); ok && err != nil && st.Code() == 3 /* InvalidArgument */ {
			return fmt.Errorf("%w: %v", errRefused, st.Message())
		}
		return err
	}
	body, err := req.MarshalProto()
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	return post(ctx, o.client, o.httpURL, "application/x-protobuf", body)
}

// toOTLP converts a shipment's pprof profile to OpenTelemetry profiles:
// one resource (service.name, host.name; the process's labels are on
// the samples), one scope, and one Profile per sample type but the
// count of samples (OTLP profiles have one sample type each), sharing
// one dictionary. Samples carry process.pid, thread.id, thread.name and
// container.id; mappings their file's build ID
// (process.executable.build_id.gnu), as the OpenTelemetry semantic
// conventions name them.
func toOTLP(s *shipment) (pprofile.Profiles, error) {
	prof := s.prof
	pd := pprofile.NewProfiles()
	d := newDict(pd.Dictionary())
	// Mappings, functions and locations, by their pprof IDs.
	maps := map[uint64]int32{}
	for _, m := range prof.Mapping {
		om := d.d.MappingTable().AppendEmpty()
		om.SetMemoryStart(m.Start)
		om.SetMemoryLimit(m.Limit)
		om.SetFileOffset(m.Offset)
		om.SetFilenameStrindex(d.str(m.File))
		if m.BuildID != "" {
			om.AttributeIndices().Append(d.attr("process.executable.build_id.gnu", m.BuildID))
		}
		maps[m.ID] = int32(d.d.MappingTable().Len() - 1)
	}
	funcs := map[uint64]int32{}
	for _, f := range prof.Function {
		of := d.d.FunctionTable().AppendEmpty()
		of.SetNameStrindex(d.str(f.Name))
		of.SetSystemNameStrindex(d.str(f.SystemName))
		of.SetFilenameStrindex(d.str(f.Filename))
		of.SetStartLine(f.StartLine)
		funcs[f.ID] = int32(d.d.FunctionTable().Len() - 1)
	}
	locs := map[uint64]int32{}
	for _, l := range prof.Location {
		ol := d.d.LocationTable().AppendEmpty()
		if l.Mapping != nil {
			ol.SetMappingIndex(maps[l.Mapping.ID])
		}
		ol.SetAddress(l.Address)
		for _, ln := range l.Line {
			oln := ol.Lines().AppendEmpty()
			if ln.Function != nil {
				oln.SetFunctionIndex(funcs[ln.Function.ID])
			}
			oln.SetLine(ln.Line)
		}
		locs[l.ID] = int32(d.d.LocationTable().Len() - 1)
	}
	rp := pd.ResourceProfiles().AppendEmpty()
	ra := rp.Resource().Attributes()
	ra.PutStr("service.name", s.service)
	if h := s.labels["hostname"]; h != "" {
		ra.PutStr("host.name", h)
	}
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName("sframekit")
	stacks := map[string]int32{}
	var key []byte
	for i, st := range prof.SampleType {
		if st.Type == "samples" && len(prof.SampleType) > 1 {
			continue
		}
		p := sp.Profiles().AppendEmpty()
		p.SampleType().SetTypeStrindex(d.str(st.Type))
		p.SampleType().SetUnitStrindex(d.str(st.Unit))
		if prof.PeriodType != nil {
			p.PeriodType().SetTypeStrindex(d.str(prof.PeriodType.Type))
			p.PeriodType().SetUnitStrindex(d.str(prof.PeriodType.Unit))
		}
		p.SetPeriod(prof.Period)
		p.SetTime(pcommon.Timestamp(prof.TimeNanos))
		p.SetDurationNano(uint64(max(prof.DurationNanos, 0)))
		for _, smp := range prof.Sample {
			if i >= len(smp.Value) || smp.Value[i] == 0 {
				continue
			}
			key = key[:0]
			for _, l := range smp.Location {
				key = strconv.AppendUint(key, l.ID, 10)
				key = append(key, ',')
			}
			si, ok := stacks[string(key)]
			if !ok {
				ost := d.d.StackTable().AppendEmpty()
				for _, l := range smp.Location {
					ost.LocationIndices().Append(locs[l.ID])
				}
				si = int32(d.d.StackTable().Len() - 1)
				stacks[string(key)] = si
			}
			os := p.Samples().AppendEmpty()
			os.SetStackIndex(si)
			os.Values().Append(smp.Value[i])
			for _, k := range sortedKeys(smp.Label) {
				if name := otelLabel[k]; name != "" && len(smp.Label[k]) == 1 {
					os.AttributeIndices().Append(d.attr(name, smp.Label[k][0]))
				}
			}
			if tid := smp.NumLabel["thread"]; len(tid) == 1 {
				os.AttributeIndices().Append(d.intAttr("thread.id", tid[0]))
			}
		}
	}
	return pd, nil
}

// otelLabel names our string labels as OpenTelemetry's semantic
// conventions do.
var otelLabel = map[string]string{"pid": "process.pid", "thread_name": "thread.name", "container_id": "container.id"}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// dict fills a ProfilesDictionary, each string and attribute once. Every
// table starts with its zero entry, as the protocol asks.
type dict struct {
	d     pprofile.ProfilesDictionary
	strs  map[string]int32
	attrs map[string]int32
}

func newDict(d pprofile.ProfilesDictionary) *dict {
	x := &dict{d: d, strs: map[string]int32{}, attrs: map[string]int32{}}
	x.str("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	return x
}

func (x *dict) str(s string) int32 {
	if i, ok := x.strs[s]; ok {
		return i
	}
	x.d.StringTable().Append(s)
	i := int32(x.d.StringTable().Len() - 1)
	x.strs[s] = i
	return i
}

func (x *dict) attr(k, v string) int32 {
	return x.attribute(k+"\x00s"+v, k, func(a pcommon.Value) { a.SetStr(v) })
}

func (x *dict) intAttr(k string, v int64) int32 {
	return x.attribute(k+"\x00i"+strconv.FormatInt(v, 10), k, func(a pcommon.Value) { a.SetInt(v) })
}

// attribute returns the index of the attribute k (key in x.attrs), added
// with set giving its value if new.
func (x *dict) attribute(key, k string, set func(pcommon.Value)) int32 {
	if i, ok := x.attrs[key]; ok {
		return i
	}
	a := x.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(x.str(k))
	set(a.Value())
	i := int32(x.d.AttributeTable().Len() - 1)
	x.attrs[key] = i
	return i
}
