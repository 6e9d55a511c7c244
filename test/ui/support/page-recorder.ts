import type { Page } from "playwright-core";

/** What the page showed over time, not only at the end. */
export interface PageRecord {
  /**
   * The `data-state-id`s that became highlighted leaves (class `active-leaf`) in any loaded
   * statechart, in order, without consecutive repeats (every StateChanged re-highlights).
   */
  leaves: string[];
  /**
   * Every assistant text block the transcript ever held, in order of appearance, with its final
   * text and whether it is still on the page (a reset segment's text is removed).
   */
  texts: Array<{ text: string; connected: boolean }>;
}

export interface PageRecorder {
  read(): Promise<PageRecord>;
}

interface InPageRecorder {
  leaves: string[];
  texts: Element[];
}

type RecorderWindow = Window & { __agentloopRecorder?: InPageRecorder };

/**
 * Installs MutationObservers on the page's statechart and transcript, so a test can check states
 * and texts that were shown only briefly — without sampling, hence without racing the stream.
 * The page must be loaded; install it before sending the message to watch.
 */
export async function recordPage(page: Page): Promise<PageRecorder> {
  await page.evaluate(() => {
    const host = window as RecorderWindow;
    if (host.__agentloopRecorder !== undefined) return;
    const recorder: InPageRecorder = { leaves: [], texts: [] };
    host.__agentloopRecorder = recorder;
    const chart = document.querySelector('[data-testid="statechart"]');
    const transcript = document.querySelector('[data-testid="transcript"]');
    if (chart === null || transcript === null) throw new Error("the page has no statechart or transcript");
    const hasLeafClass = (value: string | null) => (value ?? "").split(/\s+/).includes("active-leaf");
    new MutationObserver((records) => {
      records.forEach((record, index) => {
        const target = record.target as Element;
        // One batch may hold several changes of one element: the value right after this change is
        // the next record's old value, or the current value for the last one.
        const later = records.slice(index + 1).find((next) => next.target === target);
        const after = later === undefined ? target.getAttribute("class") : later.oldValue;
        if (hasLeafClass(record.oldValue) || !hasLeafClass(after)) return;
        const id = target.getAttribute("data-state-id");
        if (id !== null && recorder.leaves[recorder.leaves.length - 1] !== id) recorder.leaves.push(id);
      });
    }).observe(chart, {
      subtree: true,
      attributes: true,
      attributeFilter: ["class"],
      attributeOldValue: true,
    });
    const selector = '[data-testid="assistant-text"]';
    new MutationObserver((records) => {
      for (const record of records) {
        // NodeLists through Array.from: the project's lib has DOM but not DOM.Iterable.
        for (const node of Array.from(record.addedNodes)) {
          if (!(node instanceof Element)) continue;
          const found = node.matches(selector) ? [node] : Array.from(node.querySelectorAll(selector));
          for (const text of found) if (!recorder.texts.includes(text)) recorder.texts.push(text);
        }
      }
    }).observe(transcript, { subtree: true, childList: true });
  });
  return {
    read: () =>
      page.evaluate(() => {
        const recorder = (window as RecorderWindow).__agentloopRecorder;
        if (recorder === undefined) throw new Error("recordPage was not installed on this page");
        return {
          leaves: [...recorder.leaves],
          // A removed element keeps its text: what was streamed into it before the reset.
          texts: recorder.texts.map((text) => ({
            text: text.textContent ?? "",
            connected: text.isConnected,
          })),
        };
      }),
  };
}
