// A LiveKit Agents (Node) voice agent whose consequential tool,
// submit_appeal, runs only on a yes the caller gave: the session's
// transcript goes to yesguard over NATS, and the tool asks yesguard first.
//
//   YESGUARD_GRPC_ADDR   the guard's gRPC address (default 127.0.0.1:50051)
//   YESGUARD_NATS_URL    the NATS the guard reads (default nats://127.0.0.1:4222)
//   YESGUARD_TOKEN       a bearer token, if the guard requires one
//   YESGUARD_WAIT_MS     the wait for the caller's turn (see docs/integrations.md)
//   LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET: as for any LiveKit agent
//
//   npm run dev     (lk agent dev build/src/agent.js; see README.md)

import { fileURLToPath } from "node:url";
import { type JobContext, ServerOptions, cli, defineAgent, voice } from "@livekit/agents";
import { GuardClient, TranscriptPublisher } from "@yesguard/client";
import { z } from "zod";
import { callIdOf, guardedTool, publishTranscript } from "./yesguard.js";

export default defineAgent({
  entry: async (ctx: JobContext) => {
    const guard = new GuardClient({
      address: process.env.YESGUARD_GRPC_ADDR ?? "127.0.0.1:50051",
      token: process.env.YESGUARD_TOKEN,
    });
    // Pay for the connection now, not on the first tool call.
    await guard.warmup();
    const publisher = await TranscriptPublisher.connect({
      servers: process.env.YESGUARD_NATS_URL ?? "nats://127.0.0.1:4222",
      source: "livekit-agent",
    });

    await ctx.connect();
    // A room may host many calls over time: the job id makes the call unique.
    const callId = callIdOf(ctx.room.name, ctx.job.id);
    const waitMs = process.env.YESGUARD_WAIT_MS ? Number(process.env.YESGUARD_WAIT_MS) : undefined;

    const session = new voice.AgentSession({
      stt: "deepgram/nova-3",
      llm: "openai/gpt-4.1-mini",
      tts: "cartesia/sonic-2",
    });
    const agent = new voice.Agent({
      instructions:
        "You help callers appeal a decision. Before you submit an appeal, ask the caller plainly whether to submit it, " +
        "naming the appeal, and wait for their answer. If a tool refuses, follow its message.",
      tools: {
        submit_appeal: guardedTool({
          guard,
          callId,
          name: "submit_appeal",
          description: "Submit the caller's appeal once they have confirmed it.",
          parameters: z.object({ appeal_id: z.string().describe("The appeal's id, as the caller gave it") }),
          waitMs,
          // The guard's own question, when the model's will not do: spoken
          // by the session, not phrased again by the model.
          session,
          run: async ({ appeal_id }) => ({ status: "submitted", appeal_id, reference: `R-${appeal_id}` }),
        }),
      },
    });
    const stop = publishTranscript(session, publisher, callId);
    ctx.addShutdownCallback(async () => {
      stop();
      await publisher.callEnded(callId).catch(() => {});
      await publisher.close();
      guard.close();
    });
    await session.start({ agent, room: ctx.room });
  },
});

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  cli.runApp(new ServerOptions({ agent: fileURLToPath(import.meta.url) }));
}
