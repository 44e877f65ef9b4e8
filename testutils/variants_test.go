package testutils

import (
	"testing"

	"github.com/goxds/xds/resources"
)

func TestWrapVariant(t *testing.T) {
	c := ConstraintAnd(ConstraintValue("env", "prod"), ConstraintNot(ConstraintOr(ConstraintExists("canary"), ConstraintValue("region", "us"))))
	env, err := resources.FromResource(WrapVariant("C1", "v1", c, Cluster("C1", "eds")))
	if err != nil {
		t.Fatal(err)
	}
	if env.Name != "C1" || env.Version != "v1" || env.Body == nil {
		t.Fatalf("envelope %+v", env)
	}
	if got, want := resources.ConstraintsString(env.Constraints), `and(env="prod", not(or(exists(canary), region="us")))`; got != want {
		t.Fatalf("constraints %s, want %s", got, want)
	}
	if !resources.MatchConstraints(env.Constraints, map[string]string{"env": "prod", "region": "eu"}) ||
		resources.MatchConstraints(env.Constraints, map[string]string{"env": "prod", "canary": ""}) {
		t.Fatal("constraints do not match as built")
	}
	if env, err := resources.FromResource(WrapVariant("C1", "v1", nil, Cluster("C1", "eds"))); err != nil || env.Constraints != nil {
		t.Fatalf("variant without constraints: %+v, %v", env, err)
	}
}
