/* messages — names of types and roles, and ownership (ddp_msg_clear). */
#include "proto/messages.h"
#include "proto/mp.h"

#include <stdlib.h>
#include <string.h>

const char *proto_type_name(int type)
{
    static const char *names[] = {
        [DDP_JOIN] = "JOIN",     [DDP_WELCOME] = "WELCOME", [DDP_PLAN] = "PLAN",
        [DDP_CREDIT] = "CREDIT", [DDP_HEARTBEAT] = "HEARTBEAT", [DDP_BATCH] = "BATCH",
        [DDP_END] = "END",       [DDP_RESULT] = "RESULT",   [DDP_FAILED] = "FAILED",
        [DDP_STOP] = "STOP",     [DDP_DONE] = "DONE",       [DDP_EPOCH] = "EPOCH",
        [DDP_ISSUED] = "ISSUED", [DDP_REISSUE] = "REISSUE", [DDP_MEMBERS] = "MEMBERS",
        [DDP_STEP] = "STEP",     [DDP_COMMIT] = "COMMIT",   [DDP_STATE] = "STATE",
        [DDP_NCCLID] = "NCCLID",
    };
    if (type < DDP_JOIN || type > DDP_TYPE_MAX)
        return "UNKNOWN";
    return names[type];
}

const char *proto_role_name(int role)
{
    switch (role) {
    case DDP_ROLE_GPUD: return "gpud";
    case DDP_ROLE_LOADER: return "loaderd";
    case DDP_ROLE_REPORTER: return "reporterd";
    default: return "unknown";
    }
}

void ddp_msg_clear(ddp_msg_t *msg)
{
    if (!msg)
        return;
    switch (msg->type) {
    case DDP_PLAN:
        mp_strv_free(msg->u.plan.class_names, msg->u.plan.num_classes);
        mp_strv_free(msg->u.plan.paths, msg->u.plan.n);
        free(msg->u.plan.present);
        break;
    case DDP_CREDIT: free(msg->u.credit.acks); break;
    case DDP_MEMBERS:
        /* world is the names count; a decode that failed midway left it valid or 0 */
        mp_strv_free(msg->u.members.names, msg->u.members.world > 0 ? (size_t)msg->u.members.world : 0);
        break;
    case DDP_BATCH:
        free(msg->u.batch.ids);
        free(msg->u.batch.labels);
        free(msg->u.batch.pos);
        free(msg->u.batch.sizes);
        zframe_destroy(&msg->u.batch.pixels);
        break;
    case DDP_STATE: zframe_destroy(&msg->u.state.image); break;
    case DDP_ISSUED:
        free(msg->u.issued.ids);
        free(msg->u.issued.labels);
        break;
    case DDP_RESULT:
        free(msg->u.result.ids);
        free(msg->u.result.labels);
        free(msg->u.result.topk);
        free(msg->u.result.probs);
        free(msg->u.result.failed);
        mp_strv_free(msg->u.result.why, msg->u.result.nwhy);
        free(msg->u.result.loss);
        break;
    default: break;
    }
    memset(msg, 0, sizeof *msg);
}
