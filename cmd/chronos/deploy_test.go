package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The deployment files (docker-compose.yml, deploy/) cannot run here (no
// container runtime), so these tests hold them to the binary: each chronos
// container runs a real command with settings that command reads and
// accepts, listens where its probes and ports look, and is given time to
// shut down cleanly.

// deployed is one chronos container of a deployment file.
type deployed struct {
	where    string
	args     []string
	env      map[string]string
	port     int           // the container port its probes and clients use
	probes   []string      // HTTP paths probed
	stopWait time.Duration // what the platform waits after SIGTERM
}

func TestComposeFileRunsRealCommands(t *testing.T) {
	var f struct {
		Services map[string]struct {
			Image           string            `yaml:"image"`
			Build           map[string]string `yaml:"build"`
			Command         []string          `yaml:"command"`
			Environment     map[string]string `yaml:"environment"`
			Ports           []string          `yaml:"ports"`
			StopGracePeriod string            `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	readYAML(t, "../../docker-compose.yml", &f)
	var n int
	for name, s := range f.Services {
		if s.Image != "chronos:local" {
			continue
		}
		n++
		assert.Equal(t, "deploy/Dockerfile", s.Build["dockerfile"], name)
		wait, err := time.ParseDuration(s.StopGracePeriod)
		require.NoError(t, err, "%s: stop_grace_period", name)
		d := deployed{where: "docker-compose.yml service " + name, args: s.Command, env: s.Environment, port: 8080, stopWait: wait}
		for _, p := range s.Ports {
			assert.True(t, strings.HasSuffix(p, ":8080"), "%s: port %s should publish the container's 8080", name, p)
			assert.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s: port %s should be published on loopback only", name, p)
		}
		checkDeployed(t, d)
	}
	assert.Equal(t, 3, n, "chronos services in docker-compose.yml (api, scheduler, launcher)")
}

func TestKubernetesManifestsRunRealCommands(t *testing.T) {
	dir := "../../deploy/kubernetes"
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kust)
	all, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	assert.Len(t, kust.Resources, len(all)-1, "kustomization.yaml should list every other manifest in %s", dir)

	type probe struct {
		HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
	}
	type container struct {
		Image   string   `yaml:"image"`
		Args    []string `yaml:"args"`
		EnvFrom []struct {
			ConfigMapRef struct{ Name string } `yaml:"configMapRef"`
		} `yaml:"envFrom"`
		Env   []struct{ Name, Value string } `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		ReadinessProbe probe `yaml:"readinessProbe"`
		LivenessProbe  probe `yaml:"livenessProbe"`
	}
	type resource struct {
		Kind     string
		Metadata struct{ Name string }
		Data     map[string]string
		Spec     struct {
			Template struct {
				Spec struct {
					TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
					Containers                    []container `yaml:"containers"`
				}
			}
		}
	}
	configMaps := map[string]map[string]string{}
	var containers []deployed
	for _, file := range kust.Resources {
		for _, r := range decodeAll[resource](t, filepath.Join(dir, file)) {
			switch r.Kind {
			case "ConfigMap":
				configMaps[r.Metadata.Name] = r.Data
			case "Deployment":
				for _, c := range r.Spec.Template.Spec.Containers {
					require.Equal(t, "chronos", c.Image, "%s: the image kustomization.yaml names", r.Metadata.Name)
					d := deployed{where: file + " " + r.Metadata.Name, args: c.Args, env: map[string]string{},
						stopWait: time.Duration(r.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second}
					for _, ef := range c.EnvFrom {
						require.Contains(t, configMaps, ef.ConfigMapRef.Name, "%s: configMap (defined in a file listed before)", d.where)
						for k, v := range configMaps[ef.ConfigMapRef.Name] {
							d.env[k] = v
						}
					}
					for _, e := range c.Env {
						d.env[e.Name] = e.Value
					}
					ports := map[string]int{}
					for _, p := range c.Ports {
						ports[p.Name] = p.ContainerPort
					}
					for _, p := range []struct{ Path, Port string }{c.ReadinessProbe.HTTPGet, c.LivenessProbe.HTTPGet} {
						require.Contains(t, ports, p.Port, "%s: probe port", d.where)
						d.probes = append(d.probes, p.Path)
					}
					d.port = ports["http"]
					containers = append(containers, d)
				}
			}
		}
	}
	require.Len(t, containers, 3, "chronos Deployments (api, scheduler, launcher)")
	for _, d := range containers {
		checkDeployed(t, d)
	}
}

func TestDockerfileBuildsWithTheModulesGo(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	docker, err := os.ReadFile("../../deploy/Dockerfile")
	require.NoError(t, err)
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	require.NotNil(t, want, "go directive in go.mod")
	assert.Contains(t, string(docker), "FROM golang:"+string(want[1])+" ", "deploy/Dockerfile should build with go.mod's Go")
	assert.Contains(t, string(docker), "./cmd/chronos")
}

// checkDeployed parses d's command line and environment as the binary
// would and checks what the platform around it relies on.
func checkDeployed(t *testing.T, d deployed) {
	t.Helper()
	require.NotEmpty(t, d.args, "%s: command", d.where)
	cmdType, ok := commandTypes()[d.args[0]]
	require.True(t, ok, "%s: %q is not a chronos command", d.where, d.args[0])
	known := envVars(cmdType)
	for k := range d.env {
		assert.True(t, known[k], "%s: %s is not a setting of 'chronos %s'", d.where, k, d.args[0])
	}

	for k := range known {
		t.Setenv(k, "") // an empty value would still count as set: clear
		os.Unsetenv(k)  // what the test process has, restored after
	}
	for k, v := range d.env {
		t.Setenv(k, v)
	}
	var cli CLI
	var out bytes.Buffer
	parser, err := kong.New(&cli, kong.Writers(&out, &out))
	require.NoError(t, err)
	kctx, err := parser.Parse(d.args)
	require.NoError(t, err, "%s: %v", d.where, d.args)
	spec := kctx.Selected().Target.Addr().Interface().(interface{ spec() processSpec }).spec()
	require.NoError(t, spec.validate(), d.where)

	host, port, err := net.SplitHostPort(spec.common.HTTPAddr)
	require.NoError(t, err)
	assert.Contains(t, []string{"", "0.0.0.0", "::"}, host, "%s: HTTP_ADDR must listen beyond the container's loopback", d.where)
	assert.Equal(t, strconv.Itoa(d.port), port, "%s: HTTP_ADDR's port", d.where)
	for _, p := range d.probes {
		assert.Contains(t, []string{"/healthz", "/readyz"}, p, "%s: probe path", d.where)
	}

	// run's deferred stops, in turn: the scheduler's last tick, the runs
	// in progress, the HTTP server.
	need := httpShutdownTimeout
	if spec.sched != nil {
		need += schedulerStopTimeout
	}
	if spec.launch != nil {
		need += spec.launch.ShutdownTimeout
	}
	assert.GreaterOrEqual(t, d.stopWait, need, "%s: time given to stop after SIGTERM", d.where)
}

// commandTypes maps each command's name to its struct.
func commandTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	ct := reflect.TypeFor[CLI]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if _, ok := f.Tag.Lookup("cmd"); !ok {
			continue
		}
		name := f.Tag.Get("name")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// envVars returns the environment variables a command struct reads.
func envVars(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k := range envVars(f.Type) {
				out[k] = true
			}
		}
		if e := f.Tag.Get("env"); e != "" {
			out[e] = true
		}
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, v), path)
}

// decodeAll decodes every document of a multi-document YAML file.
func decodeAll[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []T
	for {
		var v T
		if err := dec.Decode(&v); err != nil {
			require.ErrorContains(t, err, "EOF", path)
			return out
		}
		out = append(out, v)
	}
}
