// Where a chat timeline's bands, bars and marks go on a 0..1 time axis, for a given "now" (running
// items end there), with the durations the page prints. Pure; typed in timeline-layout.d.ts.

/**
 * Positions of the chat's bands, bars and marks as fractions of the chat's span, with the numbers
 * the page prints (time to first token, stream and tool durations, usage, the context ratio).
 * `now` (epoch ms) is where running items end; it is never before the chat's last event.
 */
export function layoutTimeline(chat, now = chat.lastMs) {
  const t0 = chat.startMs;
  const end = chat.endMs ?? Math.max(chat.lastMs, Number.isFinite(now) ? now : chat.lastMs);
  const spanMs = Math.max(end - t0, 1);
  const x = (ms) => Math.min(1, Math.max(0, (ms - t0) / spanMs));
  const until = (endMs) => (endMs === null ? end : endMs);
  const isRunning = chat.endMs === null;

  const iterations = chat.iterations.map((band, index) => {
    const next = chat.iterations[index + 1];
    const bandEnd = band.isOpen && isRunning && !next ? end : band.endMs;
    return {
      iteration: band.iteration,
      final: band.final,
      isOpen: band.isOpen && isRunning && !next,
      startMs: band.startMs,
      endMs: bandEnd,
      x0: x(band.startMs),
      x1: x(bandEnd),
    };
  });

  const requests = chat.requests.map((request) => {
    const requestEnd = until(request.endMs);
    const lastAttempt = request.attempts[request.attempts.length - 1];
    const segments = [];
    const resets = [];
    for (const attempt of request.attempts) {
      const attemptEnd = attempt.endMs ?? requestEnd;
      const firstToken = attempt.firstTokenMs;
      const waitEnd = firstToken ?? attemptEnd;
      if (waitEnd > attempt.startMs || firstToken === null) {
        segments.push({ kind: "wait", attempt: attempt.attempt, x0: x(attempt.startMs), x1: x(waitEnd) });
      }
      if (firstToken !== null) {
        segments.push({
          kind: attempt.reset ? "discarded" : "stream",
          attempt: attempt.attempt,
          x0: x(firstToken),
          x1: x(attemptEnd),
        });
      }
      if (attempt.reset) {
        resets.push({
          attempt: attempt.attempt,
          reason: attempt.reset.reason,
          error: attempt.reset.error,
          ms: attempt.reset.ms,
          x: x(attempt.reset.ms),
        });
      }
    }
    return {
      index: request.index,
      iteration: request.iteration,
      final: request.final,
      status: request.status,
      attempts: request.attempts.length,
      usage: request.usage,
      toolCalls: request.toolCalls,
      startMs: request.startMs,
      endMs: requestEnd,
      x0: x(request.startMs),
      x1: x(requestEnd),
      durationMs: requestEnd - request.startMs,
      ttftMs: request.firstTokenMs === null ? null : request.firstTokenMs - request.startMs,
      streamMs:
        lastAttempt && lastAttempt.firstTokenMs !== null ? requestEnd - lastAttempt.firstTokenMs : null,
      segments,
      resets,
    };
  });

  const tools = chat.tools.map((tool) => {
    const toolEnd = until(tool.endMs);
    return {
      toolCallId: tool.toolCallId,
      toolName: tool.toolName,
      iteration: tool.iteration,
      lane: tool.lane,
      status: tool.status,
      error: tool.error,
      startMs: tool.startMs,
      endMs: toolEnd,
      durationMs: tool.durationMs ?? toolEnd - tool.startMs,
      x0: x(tool.startMs),
      x1: x(toolEnd),
    };
  });

  const waits = chat.waits.map((wait) => {
    const waitEnd = until(wait.endMs);
    return {
      ...wait,
      endMs: waitEnd,
      durationMs: waitEnd - wait.startMs,
      x0: x(wait.startMs),
      x1: x(waitEnd),
    };
  });

  // A sub-agent's span: its first step (or chat_started) to its end; its tool steps inside it.
  const children = (chat.children ?? []).map((lane) => {
    const steps = lane.items.filter((item) => item.kind === "tool" && item.startMs !== null);
    const laneStart = lane.startMs ?? steps[0]?.startMs ?? lane.lastMs ?? t0;
    const laneEnd = lane.endMs ?? (lane.status === "running" ? end : (lane.lastMs ?? end));
    return {
      chatId: lane.chatId,
      agent: lane.agent,
      session: lane.session,
      depth: lane.depth,
      toolCallId: lane.callKey.slice(chat.chatId.length + 1),
      status: lane.status,
      error: lane.error,
      startMs: laneStart,
      endMs: laneEnd,
      durationMs: laneEnd - laneStart,
      x0: x(laneStart),
      x1: x(laneEnd),
      steps: steps.map((step) => {
        const stepEnd = step.endMs ?? laneEnd;
        return {
          toolCallId: step.toolCallId,
          toolName: step.toolName,
          status: step.status,
          startMs: step.startMs,
          endMs: stepEnd,
          x0: x(step.startMs),
          x1: x(stepEnd),
        };
      }),
    };
  });

  const tokens = chat.requests
    .filter((request) => request.usage)
    .map((request) => ({
      index: request.index,
      iteration: request.iteration,
      final: request.final,
      usage: request.usage,
    }));

  const { tokenUsed, tokenLimit, compactRatio } = chat.context;
  const ratio = tokenUsed !== null && tokenLimit !== null && tokenLimit > 0 ? tokenUsed / tokenLimit : null;

  return {
    chatId: chat.chatId,
    text: chat.text,
    status: chat.status,
    error: chat.error,
    usage: chat.usage,
    startMs: t0,
    endMs: end,
    spanMs,
    ticks: timeTicks(spanMs),
    iterations,
    requests,
    tools,
    toolLanes: chat.toolLanes.length,
    waits,
    waitLanes: chat.waitLanes.length,
    children,
    tokens,
    context: { tokenUsed, tokenLimit, ratio, threshold: compactRatio },
  };
}

/** Round ticks (1, 2 or 5 × 10^k ms apart, at most 8) from 0 to `spanMs`, with labels. */
export function timeTicks(spanMs) {
  const rough = spanMs / 6;
  const power = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
  const step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => spanMs / candidate <= 8);
  const ticks = [];
  for (let ms = 0; ms <= spanMs + 1e-9; ms += step) {
    ticks.push({ ms, x: ms / spanMs, label: formatDuration(ms) });
  }
  return ticks;
}

/** `0 ms`, `250 ms`, `1.5 s`, `12 s`, `2 min 5 s`. */
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${trimZero((ms / 1000).toFixed(1))} s`;
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms - minutes * 60_000) / 1000);
  return seconds === 0 ? `${minutes} min` : `${minutes} min ${seconds} s`;
}

function trimZero(text) {
  return text.endsWith(".0") ? text.slice(0, -2) : text;
}
