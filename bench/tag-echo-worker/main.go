// Go port of TAG's Python echo worker (workers/echo_worker.py on python-sdk/temporal/agent): the Python
// temporalio SDK cannot be installed here (no PyPI, no Debian package), so this worker registers the same
// names on the same task queue: workflow "AgentTaskWorkflow" (query "get_progress_signals"), activity
// "_agent_task_activity"(agentId, messageData) with a 30 s start-to-close timeout, result
// {"artifacts":[{"artifactId","name":"Response","parts":[{"kind":"text","text":"Echo: <text>"}]}]}.
// Test-only addition: a text "sleep:<ms>" makes the activity sleep that long (for cancel / kill drills).
// TAG's echo agent in Switchboard's peer bench (bench/peer.ts, BENCH_ONLY=peer); scripts/ensure-tag.sh builds it.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func textOf(m map[string]interface{}) string {
	// A2AMessage.from_dict(message_data).get_text(): the first part with kind == "text" among top-level parts.
	parts, _ := m["parts"].([]interface{})
	for _, p := range parts {
		pm, _ := p.(map[string]interface{})
		if pm["kind"] == "text" {
			s, _ := pm["text"].(string)
			return s
		}
	}
	return ""
}

func AgentTaskActivity(ctx context.Context, agentID string, messageData map[string]interface{}) (map[string]interface{}, error) {
	text := textOf(messageData)
	// test-only trigger, also read from the wrapped message that /agents/{id}/a2a sends ({message, agentId, ...})
	trigger := text
	if inner, ok := messageData["message"].(map[string]interface{}); ok && trigger == "" {
		trigger = textOf(inner)
	}
	if strings.HasPrefix(trigger, "sleep:") {
		ms, _ := strconv.Atoi(strings.TrimPrefix(trigger, "sleep:"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if text == "" {
		text = "Hello"
	}
	return map[string]interface{}{"artifacts": []interface{}{map[string]interface{}{
		"artifactId": uuid.NewString(), "name": "Response",
		"parts": []interface{}{map[string]interface{}{"kind": "text", "text": "Echo: " + text}},
	}}}, nil
}

func AgentTaskWorkflow(ctx workflow.Context, taskInput map[string]interface{}) (map[string]interface{}, error) {
	signals := []map[string]interface{}{}
	add := func(status string, progress float64, result interface{}, errMsg string) {
		signals = append(signals, map[string]interface{}{"taskId": workflow.GetInfo(ctx).WorkflowExecution.ID, "status": status,
			"progress": progress, "result": result, "error": errMsg, "timestamp": workflow.Now(ctx).UTC().Format(time.RFC3339Nano)})
	}
	if err := workflow.SetQueryHandler(ctx, "get_progress_signals", func() ([]map[string]interface{}, error) { return signals, nil }); err != nil {
		return nil, err
	}
	add("working", 0.1, nil, "")
	agentID := strings.ReplaceAll(workflow.GetInfo(ctx).TaskQueueName, "-tasks", "")
	add("working", 0.5, nil, "")
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var result map[string]interface{}
	err := workflow.ExecuteActivity(actx, "_agent_task_activity", agentID, taskInput).Get(ctx, &result)
	if err != nil {
		if ctx.Err() != nil { // workflow cancellation propagates (Python: CancelledError is not an Exception)
			return nil, err
		}
		add("failed", 0, nil, err.Error())
		return map[string]interface{}{"artifacts": []interface{}{}, "error": err.Error()}, nil
	}
	add("completed", 1.0, result, "")
	return result, nil
}

func main() {
	hostPort := fmt.Sprintf("%s:%s", getenv("TEMPORAL_HOST", "localhost"), getenv("TEMPORAL_PORT", "7233"))
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: getenv("TEMPORAL_NAMESPACE", "default")})
	if err != nil {
		log.Fatalf("dial: %v", err)
	}
	defer c.Close()
	queue := getenv("TASK_QUEUE", "echo-agent-tasks")
	// Pollers: the Python SDK's defaults (max_concurrent_workflow_task_polls / max_concurrent_activity_task_polls = 5),
	// which TAG's Python worker runs with; the Go SDK's own default (2 each) left tasks 60 s on the queue at c=32.
	w := worker.New(c, queue, worker.Options{MaxConcurrentWorkflowTaskPollers: atoi(getenv("WF_POLLERS", "5")), MaxConcurrentActivityTaskPollers: atoi(getenv("ACT_POLLERS", "5"))})
	w.RegisterWorkflowWithOptions(AgentTaskWorkflow, workflow.RegisterOptions{Name: "AgentTaskWorkflow"})
	w.RegisterActivityWithOptions(AgentTaskActivity, activity.RegisterOptions{Name: "_agent_task_activity"})
	log.Printf("echo worker on %s queue %s", hostPort, queue)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func getenv(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
