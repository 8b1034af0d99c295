/**
 * The tools of llama.cpp's `tests/test-chat.cpp` (2026-10), by the names it gives them, for
 * the ported parsing and grammar cases.
 *
 * @module
 */
import type { ToolDefinition } from "../src/tools/mod.ts";

function tool(
  name: string,
  description: string,
  parameters: Record<string, unknown>,
): ToolDefinition {
  return { type: "function", function: { name, description, parameters } };
}

export const specialFunctionTool: ToolDefinition = tool("special_function", "I'm special", {
  "type": "object",
  "properties": { "arg1": { "type": "integer", "description": "The arg." } },
  "required": ["arg1"],
});
export const specialFunctionToolWithOptionalParam: ToolDefinition = tool(
  "special_function_with_opt",
  "I'm special but have optional stuff",
  {
    "type": "object",
    "properties": {
      "arg1": { "type": "integer", "description": "The arg." },
      "arg2": { "type": "integer", "description": "The optional arg." },
    },
    "required": ["arg1"],
  },
);
export const emptyArgsTool: ToolDefinition = tool("empty_args", "A tool that takes no arguments", {
  "type": "object",
  "properties": {},
});
export const emptyArgsToolNoProperties: ToolDefinition = tool(
  "empty_args_no_props",
  "A tool that takes no arguments and has no properties",
  { "type": "object" },
);
export const emptyArgsToolNoSchema: ToolDefinition = tool(
  "empty_args_no_schema",
  "A tool that takes no arguments and has no parameters schema",
  {},
);
export const pythonTool: ToolDefinition = tool("python", "an ipython interpreter", {
  "type": "object",
  "properties": { "code": { "type": "string", "description": "Python code to execute." } },
  "required": ["code"],
});
export const htmlTool: ToolDefinition = tool("html", "an html validator", {
  "type": "object",
  "properties": { "markup": { "type": "string", "description": "HTML markup to validate." } },
  "required": ["markup"],
});
export const getTimeTool: ToolDefinition = tool("get_time", "Get the current time in a city", {
  "type": "object",
  "properties": { "city": { "type": "string", "description": "City name" } },
  "required": ["city"],
});
export const getWeatherTool: ToolDefinition = tool(
  "get_weather",
  "Get the current weather in a city",
  {
    "type": "object",
    "properties": { "city": { "type": "string", "description": "City name" } },
    "required": ["city"],
  },
);
export const todoList: ToolDefinition = tool("todo_list", "Create or update the todo list", {
  "type": "object",
  "properties": { "todos": { "type": "array", "description": "List of TODO list items" } },
  "required": ["todos"],
});
export const editTool: ToolDefinition = tool("edit", "Edit file", {
  "type": "object",
  "properties": {
    "filename": { "type": "string", "description": "Path of file to edit" },
    "oldString": { "type": "string", "description": "String to replace" },
    "newString": { "type": "string", "description": "New (replacement) value" },
  },
  "required": ["filename", "oldString", "newString"],
});
export const manageTodoListTool: ToolDefinition = tool(
  "manage_todo_list",
  "Create or update the todo list",
  {
    "type": "object",
    "properties": { "todos": { "type": "array", "description": "List of TODO list items" } },
    "required": ["todos"],
  },
);
export const runInTerminalTool: ToolDefinition = tool("run_in_terminal", "Run a shell command.", {
  "type": "object",
  "properties": { "command": { "type": "string", "description": "Shell command to run" } },
  "required": ["command"],
});
export const magicTool: ToolDefinition = tool("magic", "Magic tool that takes a hash", {
  "type": "object",
  "properties": { "name": { "type": "string" }, "ref": { "type": "string" } },
  "required": ["name", "ref"],
});
export const magicIntTool: ToolDefinition = tool("magic_int", "Magic tool that takes a hash", {
  "type": "object",
  "properties": { "ref": { "type": "integer" }, "name": { "type": "string" } },
  "required": ["ref"],
});
export const amountTool: ToolDefinition = tool("amount", "Amount converter", {
  "type": "object",
  "properties": { "orig": { "type": "number" } },
  "required": ["orig"],
});
export const toggleTool: ToolDefinition = tool("toggle", "Toggle a feature", {
  "type": "object",
  "properties": {
    "enabled": { "type": "boolean", "description": "Whether to enable the feature" },
  },
  "required": ["enabled"],
});
export const nullableTool: ToolDefinition = tool("set_nullable", "Set a nullable value", {
  "type": "object",
  "properties": { "value": { "type": "null", "description": "A null value" } },
  "required": ["value"],
});
export const configTool: ToolDefinition = tool("set_config", "Set configuration", {
  "type": "object",
  "properties": { "config": { "type": "object", "description": "Configuration dict" } },
  "required": ["config"],
});
export const calendarCreateEventTool: ToolDefinition = tool(
  "Calendar.create_event",
  "Create a calendar event",
  {
    "type": "object",
    "properties": {
      "title": { "type": "string" },
      "participants": { "type": "array", "items": { "type": "string" } },
      "metadata": { "type": "object" },
    },
    "required": ["title", "participants", "metadata"],
  },
);
export const imaginaryNumberTool: ToolDefinition = tool(
  "imaginary_number",
  "Imaginary number converter",
  {
    "type": "object",
    "properties": {
      "number": {
        "type": "object",
        "properties": { "real": { "type": "number" }, "imaginary": { "type": "number" } },
        "required": ["real", "imaginary"],
      },
    },
    "required": ["number"],
  },
);
export const nestedArgsTool: ToolDefinition = tool(
  "nested_args",
  "Tool with nested array arguments",
  {
    "type": "object",
    "properties": {
      "tags": { "type": "array", "items": { "type": "string" } },
      "entries": {
        "type": "array",
        "items": {
          "type": "object",
          "properties": { "id": { "type": "integer" }, "label": { "type": "string" } },
          "required": ["id", "label"],
        },
      },
    },
    "required": ["tags", "entries"],
  },
);
export const unionArgsTool: ToolDefinition = tool("union_args", "Tool with union arguments", {
  "type": "object",
  "properties": {
    "filter": {
      "anyOf": [{ "type": "array", "items": { "type": "string" } }, {
        "type": "object",
        "properties": { "field": { "type": "string" }, "op": { "type": "string" } },
        "required": ["field", "op"],
      }],
    },
    "label": {
      "oneOf": [{ "type": "string" }, {
        "type": "object",
        "properties": { "text": { "type": "string" } },
      }],
    },
    "limit": {
      "oneOf": [{ "type": "integer" }, {
        "type": "object",
        "properties": { "max": { "type": "integer" } },
        "required": ["max"],
      }],
    },
  },
});
export const nullableStringTool: ToolDefinition = tool(
  "set_nullable_str",
  "Set a nullable string value",
  {
    "type": "object",
    "properties": { "name": { "type": ["string", "null"], "description": "A nullable string" } },
    "required": ["name"],
  },
);
export const nullableStringNullFirstTool: ToolDefinition = tool(
  "set_nullable_str_nf",
  "Set a nullable string value with null first in type array",
  {
    "type": "object",
    "properties": {
      "name": { "type": ["null", "string"], "description": "A nullable string with null first" },
    },
    "required": ["name"],
  },
);
export const nullableIntTool: ToolDefinition = tool(
  "set_nullable_int",
  "Set a nullable integer value",
  {
    "type": "object",
    "properties": { "count": { "type": ["integer", "null"], "description": "A nullable integer" } },
    "required": ["count"],
  },
);
export const stringUnionTool: ToolDefinition = tool(
  "set_union",
  "Set values whose types are unions with string",
  {
    "type": "object",
    "properties": {
      "value": { "type": ["string", "object"], "description": "A string or object value" },
      "amount": { "type": ["string", "integer"], "description": "A string or integer value" },
    },
    "required": ["value", "amount"],
  },
);
export const enumNoTypeTool: ToolDefinition = tool("set_unit", "Set a temperature unit", {
  "type": "object",
  "properties": {
    "unit": { "enum": ["celsius", "fahrenheit"], "description": "Temperature unit" },
  },
  "required": ["unit"],
});
export const stringParamTool: ToolDefinition = tool(
  "string_param",
  "Tool with string parameter for testing",
  {
    "type": "object",
    "properties": { "text": { "type": "string", "description": "A text parameter" } },
    "required": [],
  },
);
export const quotedUnquotedTool: ToolDefinition = tool(
  "quoted_unquoted",
  "Tool with two string parameters, one for quoted string, one for unquoted",
  {
    "type": "object",
    "properties": {
      "quoted": { "type": "string", "description": "Quoted value" },
      "unquoted": { "type": "string", "description": "Unquoted value" },
    },
    "required": ["quoted", "unquoted"],
  },
);
export const tool2req4opt: ToolDefinition = tool(
  "tool_2req_4opt",
  "Tool with 2 required and 4 optional params",
  {
    "type": "object",
    "properties": {
      "req1": { "type": "string", "description": "Required string" },
      "req2": { "type": "integer", "description": "Required int" },
      "opt1": { "type": "string", "description": "Optional string 1" },
      "opt2": { "type": "integer", "description": "Optional int 1" },
      "opt3": { "type": "string", "description": "Optional string 2" },
      "opt4": { "type": "integer", "description": "Optional int 2" },
    },
    "required": ["req1", "req2"],
  },
);
export const tool2req5opt: ToolDefinition = tool(
  "tool_2req_5opt",
  "Tool with 2 required and 5 optional params",
  {
    "type": "object",
    "properties": {
      "req1": { "type": "string", "description": "Required string" },
      "req2": { "type": "integer", "description": "Required int" },
      "opt1": { "type": "string", "description": "Optional string 1" },
      "opt2": { "type": "integer", "description": "Optional int 1" },
      "opt3": { "type": "string", "description": "Optional string 2" },
      "opt4": { "type": "integer", "description": "Optional int 2" },
      "opt5": { "type": "string", "description": "Optional string 3" },
    },
    "required": ["req1", "req2"],
  },
);
