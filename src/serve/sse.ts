// Server-sent events in the OpenAI streaming format: one `data: <json>` event per chunk, then
// `data: [DONE]`. A client that goes away cancels the stream, which aborts its requests in the
// engine (their slots free at once); an error after the headers went out is sent as one last
// event with vLLM's error body, since the status line can no longer change.
import { errorBody, responseForError } from "./openai.ts";

export type Send = (chunk: unknown) => void;

export function sseResponse(produce: (send: Send) => Promise<void>, onCancel: () => void): Response {
  const encoder = new TextEncoder();
  let open = true;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string) => {
        if (!open) throw new Error("the client closed the stream");
        controller.enqueue(encoder.encode(text));
      };
      const send: Send = (chunk) => write(`data: ${JSON.stringify(chunk)}\n\n`);
      produce(send)
        .catch(async (err) => {
          if (!open) return;
          const response = responseForError(err);
          const body = (await response.json()) as ReturnType<typeof errorBody>;
          send(body);
        })
        .finally(() => {
          if (!open) return;
          write("data: [DONE]\n\n");
          open = false;
          controller.close();
        });
    },
    cancel() {
      open = false;
      onCancel();
    },
  });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
  });
}
