// Command check decodes every Kubernetes manifest it is given strictly into the Kubernetes API's own Go types
// (k8s.io/api), the schema check kubeconform -strict makes, without a schema download: an unknown or misspelt
// field, a value of the wrong type, a bad quantity ("500mi") or a duplicated key fails, as does a kind this
// program does not know. Then the names the API server would refuse (object, label, container and port names).
//
// Usage: check FILE...   (each a YAML stream of one or more documents). Prints one line per problem and exits 1,
// or prints what it checked and exits 0. The cross-references between the manifests (selectors, probes, keys,
// the drain's timings) are test/deploy.test.ts's.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The kinds deploy/ ships, by apiVersion and kind: one more needs a line here, so nothing goes unchecked.
var kinds = map[string]func() object{
	"apps/v1/Deployment":            func() object { return &appsv1.Deployment{} },
	"v1/Service":                    func() object { return &corev1.Service{} },
	"v1/ConfigMap":                  func() object { return &corev1.ConfigMap{} },
	"v1/Secret":                     func() object { return &corev1.Secret{} },
	"v1/ServiceAccount":             func() object { return &corev1.ServiceAccount{} },
	"policy/v1/PodDisruptionBudget": func() object { return &policyv1.PodDisruptionBudget{} },
}

type object interface{ GetObjectMeta() metav1.Object }

// A line that is only `---` (and a comment) separates documents, as in YAML.
var separator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: check FILE...")
		os.Exit(2)
	}
	var problems []string
	count := 0
	for _, file := range os.Args[1:] {
		data, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for i, doc := range separator.Split(string(data), -1) {
			if isEmpty(doc) {
				continue
			}
			count++
			for _, p := range checkDocument([]byte(doc)) {
				problems = append(problems, fmt.Sprintf("%s (document %d): %s", file, i+1, p))
			}
		}
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("%d documents in %d files decode strictly into the Kubernetes API types\n", count, len(os.Args)-1)
}

func isEmpty(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

func checkDocument(doc []byte) []string {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return []string{err.Error()}
	}
	make, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return []string{fmt.Sprintf("apiVersion %q kind %q is not a kind deploy/ ships (add it to deploy/check/main.go)", tm.APIVersion, tm.Kind)}
	}
	obj := make()
	// Strict: YAML to JSON, then decoded with unknown fields and duplicate keys refused.
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return []string{fmt.Sprintf("%s: %v", tm.Kind, err)}
	}
	meta := obj.GetObjectMeta()
	where := fmt.Sprintf("%s/%s", tm.Kind, meta.GetName())
	var problems []string
	add := func(what string, errs []string) {
		for _, e := range errs {
			problems = append(problems, fmt.Sprintf("%s: %s: %s", where, what, e))
		}
	}
	if meta.GetName() == "" {
		add("metadata.name", []string{"missing"})
	}
	add("metadata.name", validation.IsDNS1123Subdomain(meta.GetName()))
	if meta.GetNamespace() != "" {
		add("metadata.namespace", []string{"set; the manifests are namespace-agnostic (kubectl -n, or kustomize's namespace:)"})
	}
	add("metadata.labels", labels(meta.GetLabels()))
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Selector == nil {
			add("spec.selector", []string{"missing"})
		}
		add("spec.template.metadata.labels", labels(o.Spec.Template.Labels))
		problems = append(problems, podSpec(where, &o.Spec.Template.Spec)...)
	case *corev1.Service:
		for _, p := range o.Spec.Ports {
			if p.Name != "" {
				add("spec.ports.name", validation.IsValidPortName(p.Name))
			}
		}
	case *corev1.ConfigMap:
		for k := range o.Data {
			add("data key", validation.IsConfigMapKey(k))
		}
	case *corev1.Secret:
		for k := range o.StringData {
			add("stringData key", validation.IsConfigMapKey(k))
		}
	case *policyv1.PodDisruptionBudget:
		if o.Spec.Selector == nil {
			add("spec.selector", []string{"missing"})
		}
		if (o.Spec.MinAvailable == nil) == (o.Spec.MaxUnavailable == nil) {
			add("spec", []string{"exactly one of minAvailable and maxUnavailable"})
		}
	}
	return problems
}

func labels(l map[string]string) []string {
	var errs []string
	for k, v := range l {
		errs = append(errs, validation.IsQualifiedName(k)...)
		errs = append(errs, validation.IsValidLabelValue(v)...)
	}
	return errs
}

func podSpec(where string, spec *corev1.PodSpec) []string {
	var problems []string
	if len(spec.Containers) == 0 {
		problems = append(problems, where+": spec.template.spec.containers: none")
	}
	for _, c := range spec.Containers {
		for _, e := range validation.IsDNS1123Label(c.Name) {
			problems = append(problems, fmt.Sprintf("%s: container name %q: %s", where, c.Name, e))
		}
		if c.Image == "" {
			problems = append(problems, fmt.Sprintf("%s: container %s: no image", where, c.Name))
		}
		for _, p := range c.Ports {
			if p.Name != "" {
				for _, e := range validation.IsValidPortName(p.Name) {
					problems = append(problems, fmt.Sprintf("%s: container %s: port name %q: %s", where, c.Name, p.Name, e))
				}
			}
		}
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				problems = append(problems, fmt.Sprintf("%s: container %s: env %q: %s", where, c.Name, e.Name, msg))
			}
		}
	}
	return problems
}

