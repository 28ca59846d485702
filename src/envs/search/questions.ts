// Questions over a generated world, each with the search queries that answer it. One-hop
// questions need the subject's document; two-hop questions need the subject's document to find a
// second entity, then that entity's document. Example (two hops):
//
//   question: In which country was Velmora Quist born?
//   queries:  "Velmora Quist" -> born in Tarnhollow;  "Tarnhollow" -> a city in Brenithia
//   answer:   Brenithia
import type { Rng } from "../random.ts";
import type { World } from "./corpus.ts";

export interface SearchQuestion {
  key: string;
  question: string;
  answer: string;
  /** Gold queries, in order; the last one's top document holds the answer. */
  queries: string[];
  /** Title of the document that holds the answer. */
  answerDocument: string;
  /** One sentence per hop: the worked solution. */
  reasoning: string[];
}

export function makeQuestion(rng: Rng, world: World, hops: readonly number[]): SearchQuestion {
  const person = rng.pick(world.people);
  const city = (name: string) => world.cities.find((c) => c.name === name)!;
  const company = (name: string) => world.companies.find((c) => c.name === name)!;
  if (rng.pick(hops) === 1) {
    switch (rng.int(0, 3)) {
      case 0:
        return {
          key: `birthplace:${person.name}`,
          question: `In which city was ${person.name} born?`,
          answer: person.birthplace,
          queries: [person.name],
          answerDocument: person.name,
          reasoning: [`${person.name} was born in ${person.birthplace}.`],
        };
      case 1:
        return {
          key: `employer:${person.name}`,
          question: `Which company does ${person.name} work at?`,
          answer: person.employer,
          queries: [person.name],
          answerDocument: person.name,
          reasoning: [`${person.name} works at ${person.employer}.`],
        };
      case 2:
        return {
          key: `born:${person.name}`,
          question: `In what year was ${person.name} born?`,
          answer: String(person.born),
          queries: [person.name],
          answerDocument: person.name,
          reasoning: [`${person.name} was born in ${person.born}.`],
        };
      default: {
        const firm = company(person.employer);
        return {
          key: `founded:${firm.name}`,
          question: `In what year was ${firm.name} founded?`,
          answer: String(firm.founded),
          queries: [firm.name],
          answerDocument: firm.name,
          reasoning: [`${firm.name} was founded in ${firm.founded}.`],
        };
      }
    }
  }
  switch (rng.int(0, 2)) {
    case 0: {
      const place = city(person.birthplace);
      return {
        key: `birth_country:${person.name}`,
        question: `In which country was ${person.name} born?`,
        answer: place.country,
        queries: [person.name, place.name],
        answerDocument: place.name,
        reasoning: [`${person.name} was born in ${place.name}.`, `${place.name} is in ${place.country}.`],
      };
    }
    case 1: {
      const firm = company(person.employer);
      return {
        key: `employer_founded:${person.name}`,
        question: `In what year was the company that ${person.name} works at founded?`,
        answer: String(firm.founded),
        queries: [person.name, firm.name],
        answerDocument: firm.name,
        reasoning: [`${person.name} works at ${firm.name}.`, `${firm.name} was founded in ${firm.founded}.`],
      };
    }
    default: {
      const firm = company(person.employer);
      return {
        key: `employer_hq:${person.name}`,
        question: `In which city is the headquarters of the company that ${person.name} works at?`,
        answer: firm.headquarters,
        queries: [person.name, firm.name],
        answerDocument: firm.name,
        reasoning: [
          `${person.name} works at ${firm.name}.`,
          `The headquarters of ${firm.name} are in ${firm.headquarters}.`,
        ],
      };
    }
  }
}
