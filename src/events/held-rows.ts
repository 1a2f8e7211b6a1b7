/**
 * The tasks whose first row this process holds back: a fresh task's first exchange writes its `working` change with
 * its final one when the agent answers at once (activities/forward-message.ts), else when its hold ends. A child
 * task's front door that waits for its parent's row (task-intake.ts parentBeingRecorded) has it written at once when
 * the parent runs here; a parent held in another process writes it when its hold ends.
 */
export class HeldRows {
  private readonly rows = new Map<string, () => void>();

  /** `write` writes the task's held row now. @returns what ends the hold's entry (the row was written, or taken). */
  hold(tenant: string, taskId: string, write: () => void): () => void {
    const key = `${tenant}\u0000${taskId}`;
    this.rows.set(key, write);
    return () => {
      if (this.rows.get(key) === write) this.rows.delete(key);
    };
  }

  /** Writes the task's row now if this process holds it back. */
  release(tenant: string, taskId: string): void {
    const key = `${tenant}\u0000${taskId}`;
    const write = this.rows.get(key);
    this.rows.delete(key);
    write?.();
  }
}

export const heldRows = new HeldRows();
